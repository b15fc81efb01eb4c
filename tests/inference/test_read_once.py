"""``predict_file`` reads a small input once (the check's sentences are parsed) and a larger one
twice (memory bounded), with the same output either way."""

from __future__ import annotations

import pytest

from parser.inference import predict
from tests.conftest import FIXTURES
from tests.inference.helpers import train_tiny


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return train_tiny(tmp_path_factory.mktemp("read-once"), "classifier")


@pytest.mark.parametrize(("bound", "reads"), [(10**9, 1), (5, 2)])
def test_an_input_is_read_once_up_to_the_bound(checkpoint, tmp_path, monkeypatch, bound, reads):
    dev = FIXTURES / "tiny-dev.conllu"
    calls = []
    stream = predict.stream_conllu

    def counted(*args, **kwargs):
        calls.append(args[0])
        return stream(*args, **kwargs)

    monkeypatch.setattr(predict, "stream_conllu", counted)
    monkeypatch.setattr(predict, "READ_ONCE_WORDS", bound)
    out = tmp_path / "pred.conllu"
    count = predict.predict_file(checkpoint, dev, out)
    assert len(calls) == reads
    reference = tmp_path / "reference.conllu"
    monkeypatch.setattr(predict, "READ_ONCE_WORDS", 0)  # always read again, as before
    assert predict.predict_file(checkpoint, dev, reference) == count
    assert out.read_text(encoding="utf-8") == reference.read_text(encoding="utf-8")
    assert count > 1
