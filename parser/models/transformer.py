"""A pretrained Hugging Face transformer as the word encoder of the biaffine scorer.

``transformers`` is an optional extra (``pip install -e '.[transformers]'``): it is imported
when a :class:`TransformerEncoder` is built, never when this module is, so a parser without a
transformer runs without it.

Words come back from the batch's character ids (the model keeps the character vocabulary):
forms are cut at the data layer's 32 characters, and a character unseen in training reads as
U+FFFD. The model's config and tokenizer files are kept in the state dict (``extra_state``),
so a checkpoint restores the encoder with no network and no model folder.
"""

from __future__ import annotations

import importlib
import io
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from parser.config import Pooling
from parser.models.subwords import ScalarMix, pool_words, split_windows

__all__ = ["TransformerEncoder"]

UNK_CHAR = "\ufffd"
SPECIAL_CHARS = 3  # char ids 0..2: PAD, UNK, ROOT


def _transformers():
    try:
        return importlib.import_module("transformers")
    except ImportError as error:  # the optional extra is missing
        raise ImportError(
            "model.encoder.kind=transformer needs the transformers package: "
            "pip install -e '.[transformers]'"
        ) from error


class TransformerEncoder(nn.Module):
    """Batch character ids ``[B, N+1, C]`` -> word vectors ``[B, N+1, H]`` (ROOT: the first
    window's first special token, e.g. ``[CLS]``; zero beyond each length).

    ``name``: a hub name or a local folder. ``char_tokens``: the character vocabulary
    (``vocabs.chars.tokens``). ``window``: subwords per window, special tokens included;
    ``overlap``: subwords shared by consecutive windows. ``finetune=False`` freezes the
    transformer (always in eval mode) and, with ``cache``, keeps each sentence's pooled hidden
    states (float16) after the first time; the scalar mix stays trainable either way.
    """

    def __init__(self, *, name: str, char_tokens: Sequence[str], pooling: Pooling | str = "first",
                 window: int = 512, overlap: int = 128, finetune: bool = False,
                 lr: float = 5e-5, warmup_steps: int = 1000, cache: bool = True) -> None:
        super().__init__()
        if not name:
            raise ValueError("model.encoder.name: give a Hugging Face hub name or a model folder")
        self.name, self.pooling = str(name), Pooling(pooling)
        self.char_tokens = list(char_tokens)
        self.window, self.overlap = int(window), int(overlap)
        self.finetune, self.cache_features = bool(finetune), bool(cache) and not finetune
        self.group = {"name": "encoder", "lr": float(lr), "warmup_steps": int(warmup_steps)}
        self._cache: dict[bytes, Tensor] = {}
        self._files: dict[str, bytes] = {}
        self.model, self.tokenizer = None, None
        self._missing: Exception | None = None
        try:  # a local folder, or a hub name (offline: HF_HUB_OFFLINE, from the local cache)
            folder = Path(self.name).expanduser()
            self._materialise(str(folder) if folder.is_dir() else self.name, pretrained=True)
        except (OSError, ValueError) as error:  # a checkpoint's extra_state may still give it
            if isinstance(error, ValueError) and "window" in str(error):
                raise
            self._missing = error
        n_layers = self.model.config.num_hidden_layers + 1 if self.model is not None else 1
        self.mix = ScalarMix(n_layers)

    @property
    def loaded(self) -> bool:
        return self.model is not None

    # -- loading --------------------------------------------------------------------------------

    def _materialise(self, source: str, *, pretrained: bool) -> None:
        hf = _transformers()
        self.tokenizer = hf.AutoTokenizer.from_pretrained(source, use_fast=True)
        if not self.tokenizer.is_fast:
            raise ValueError(f"model.encoder.name={self.name}: needs a fast tokenizer (word ids)")
        if pretrained:
            self.model = hf.AutoModel.from_pretrained(source)
        else:
            self.model = hf.AutoModel.from_config(hf.AutoConfig.from_pretrained(source))
        for parameter in self.model.parameters():
            parameter.requires_grad_(self.finetune)
            if self.finetune:
                parameter.optim_group = self.group  # its own lr and warm-up (runtime.optim)
        limit = getattr(self.model.config, "max_position_embeddings", self.window)
        if not 4 <= self.window <= limit or not 0 <= self.overlap < self.window - 3:
            raise ValueError(f"model.encoder.window={self.window}, overlap={self.overlap}: need "
                             f"4 <= window <= {limit} and 0 <= overlap < window - 3")
        with tempfile.TemporaryDirectory() as folder:
            self.tokenizer.save_pretrained(folder)
            self.model.config.save_pretrained(folder)
            self._files = {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}
        # the special tokens around a sequence ([CLS] ... [SEP], <s> ... </s>): from a probe
        bare = self.tokenizer("word", add_special_tokens=False)["input_ids"]
        full = self.tokenizer("word")["input_ids"]
        at = next(k for k in range(len(full) - len(bare) + 1) if full[k : k + len(bare)] == bare)
        self._prefix, self._suffix = full[:at], full[at + len(bare) :]
        self._missing = None
        self._cache.clear()

    def get_extra_state(self) -> dict:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, data in sorted(self._files.items()):
                archive.writestr(name, data)
        return {"files": buffer.getvalue(), "name": self.name}

    def set_extra_state(self, state: dict) -> None:
        # Runs before the children load (Module.load_state_dict): a model built here from the
        # stored config receives the checkpoint's weights right after.
        with tempfile.TemporaryDirectory() as folder:
            with zipfile.ZipFile(io.BytesIO(state["files"])) as archive:
                archive.extractall(folder)
            if self.model is None:
                self._materialise(folder, pretrained=False)
                self.mix = ScalarMix(self.model.config.num_hidden_layers + 1).to(self.mix.weights.device)
            else:
                self.tokenizer = _transformers().AutoTokenizer.from_pretrained(folder, use_fast=True)
                self._files = {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}
        self._cache.clear()

    def train(self, mode: bool = True) -> TransformerEncoder:
        super().train(mode)
        if self.model is not None and not self.finetune:
            self.model.eval()  # frozen: no dropout, so cached features stay valid
        return self

    @property
    def n_out(self) -> int:
        """The feature width (1 until a model is loaded: the scorer resizes on restore)."""
        return int(self.model.config.hidden_size) if self.model is not None else 1

    # -- encoding -------------------------------------------------------------------------------

    def forms(self, chars: Tensor, lengths: Tensor) -> list[list[str]]:
        """The word forms of each sentence (ROOT left out) from character ids ``[B, N+1, C]``."""
        rows = chars.tolist()
        sentences = []
        for b, n in enumerate(lengths.tolist()):
            words = []
            for row in rows[b][1 : n + 1]:
                letters = [self.char_tokens[c] if c >= SPECIAL_CHARS else UNK_CHAR for c in row if c]
                words.append("".join(letters) or UNK_CHAR)
            sentences.append(words)
        return sentences

    def pieces(self, words: list[str]) -> tuple[list[int], list[int]]:
        """Subword ids of a sentence (no special tokens) and the word (0-based) of each."""
        encoded = self.tokenizer(words, is_split_into_words=True, add_special_tokens=False)
        ids, owner = [], []
        for piece, word in zip(encoded["input_ids"], encoded.word_ids()):
            ids.append(piece)
            owner.append(word)
        # a word the tokenizer drops entirely (e.g. only control characters) reads as UNK
        seen = set(owner)
        if len(seen) < len(words):
            fixed_ids, fixed_owner, k = [], [], 0
            for w in range(len(words)):
                if w not in seen:
                    fixed_ids.append(self.tokenizer.unk_token_id)
                    fixed_owner.append(w)
                while k < len(owner) and owner[k] == w:
                    fixed_ids.append(ids[k])
                    fixed_owner.append(w)
                    k += 1
            ids, owner = fixed_ids, fixed_owner
        return ids, owner

    def layers(self, sentences: list[tuple[list[int], list[int], int]]) -> list[Tensor]:
        """Per sentence ``(ids, owner, n_words)``: pooled hidden states ``[n_words+1, L, H]``
        (ROOT first), all windows of all sentences in one transformer call."""
        usable = self.window - len(self._prefix) - len(self._suffix)
        inputs, plans = [], []
        for ids, _, _ in sentences:
            windows, chosen = split_windows(len(ids), size=usable, overlap=min(self.overlap, usable - 1))
            first = len(inputs)
            inputs += [self._prefix + ids[s:e] + self._suffix for s, e in windows]
            plans.append((first, windows, chosen))
        width = max(len(x) for x in inputs)
        device = self.mix.weights.device
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in inputs], device=device)
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in inputs], device=device)
        out = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        hidden = torch.stack(out.hidden_states, dim=2)  # [windows, T, L, H]
        results = []
        for (ids, owner, n_words), (first, windows, chosen) in zip(sentences, plans):
            rows = torch.tensor([first + w for w in chosen], device=device)
            cols = torch.tensor([len(self._prefix) + i - windows[w][0] for i, w in enumerate(chosen)],
                                device=device)
            words = pool_words(hidden[rows, cols], owner, n_words, pooling=self.pooling)
            results.append(torch.cat([hidden[first, :1], words], dim=0))
        return results

    def forward(self, chars: Tensor, lengths: Tensor) -> Tensor:
        """chars ``[B, N+1, C]``, lengths ``[B]`` -> ``[B, N+1, H]`` (zero beyond each length)."""
        if self.model is None:
            raise RuntimeError(
                f"model.encoder.name={self.name}: neither a model folder nor loadable from the hub "
                f"({self._missing}); `make minilm` puts all-MiniLM-L6-v2 in .models/")
        sentences = [(*self.pieces(words), len(words)) for words in self.forms(chars, lengths)]
        if self.cache_features:
            keys = [torch.tensor(ids).numpy().tobytes() for ids, _, _ in sentences]
            todo = [k for k in dict.fromkeys(keys) if k not in self._cache]
            if todo:
                where = {k: keys.index(k) for k in todo}
                with torch.no_grad():
                    fresh = self.layers([sentences[where[k]] for k in todo])
                self._cache.update({k: v.to(torch.float16) for k, v in zip(todo, fresh)})
            per_sentence = [self._cache[k].float() for k in keys]
        elif self.finetune:
            per_sentence = self.layers(sentences)
        else:
            with torch.no_grad():
                per_sentence = self.layers(sentences)
        layers = chars.new_zeros((*chars.shape[:2], *per_sentence[0].shape[1:]), dtype=torch.float)
        for b, states in enumerate(per_sentence):
            layers[b, : states.shape[0]] = states
        return self.mix(layers)
