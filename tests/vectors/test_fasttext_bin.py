"""A fastText binary model (written by gensim's save_facebook_model) read by parser.data.vectors
without gensim: the words' vectors and the n-gram vectors of words it lacks are gensim's."""

from __future__ import annotations

import numpy as np
import pytest

from parser.data.vectors import VectorsError, read_vectors

gensim_models = pytest.importorskip("gensim.models", reason="gensim (the 'vectors' extra) writes the .bin")
fasttext_module = pytest.importorskip("gensim.models.fasttext")

SENTENCES = [["le", "chat", "mange", "la", "souris"], ["la", "souris", "dort", "été"],
             ["le", "Chat", "dort"]] * 10


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    model = gensim_models.FastText(vector_size=8, window=2, min_count=1, epochs=2, workers=1,
                                   seed=1, bucket=500, min_n=2, max_n=4)
    model.build_vocab(corpus_iterable=SENTENCES)
    model.train(corpus_iterable=SENTENCES, total_examples=len(SENTENCES), epochs=2)
    path = tmp_path_factory.mktemp("bin") / "model.bin"
    fasttext_module.save_facebook_model(model, str(path))
    return path


def test_the_words_and_unknown_words_have_fasttexts_vectors(model_file):
    reference = fasttext_module.load_facebook_vectors(str(model_file))
    vectors = read_vectors(model_file, wanted=["Souris", "chats"], max_rows=2, reserved=3)
    first = list(reference.index_to_key[:2])
    assert vectors.fmt == "fasttext_bin" and vectors.rows_read == len(reference.index_to_key)
    # the first two words, the lowercased wanted word, then the wanted words the model lacks
    assert vectors.words[:2] == first and "souris" in vectors.words and "chats" in vectors.words
    assert "Souris" in vectors.words  # not in the model: from its n-grams
    assert not vectors.matrix[:3].any()
    for i, word in enumerate(vectors.words):
        np.testing.assert_allclose(vectors.matrix[3 + i], reference[word], atol=1e-6)


def test_a_truncated_binary_fails_naming_the_file_and_the_offset(model_file, tmp_path):
    data = model_file.read_bytes()
    words = len(fasttext_module.load_facebook_vectors(str(model_file)).index_to_key)
    output_matrix = 1 + 16 + words * 8 * 4  # after the input matrix; not read
    for cut, where in ((len(data) - output_matrix - 50, "input matrix"), (200, "dictionary")):
        path = tmp_path / f"cut{cut}.bin"
        path.write_bytes(data[:cut])
        with pytest.raises(VectorsError, match=rf"cut{cut}.bin:byte \d+: the file ends inside the {where}"):
            read_vectors(path)
