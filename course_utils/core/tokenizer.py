"""A character-level tokenizer: every distinct character of a text is one token."""

from __future__ import annotations


class CharTokenizer:
    """Maps characters to ids (sorted by code point) and back; unknown characters are errors."""

    def __init__(self, text_or_chars) -> None:
        chars = sorted(set(text_or_chars))
        if not chars:
            raise ValueError("cannot build a vocabulary from empty text: pass some characters")
        self.itos = chars
        self.stoi = {ch: i for i, ch in enumerate(chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            raise ValueError(
                f"characters not in the vocabulary: {unknown!r}; remove them or build the "
                f"tokenizer from a text that contains them"
            )
        return [self.stoi[ch] for ch in text]

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(
                f"token ids out of range: {bad[:5]}; ids must lie in [0, {self.vocab_size - 1}]"
            )
        return "".join(self.itos[i] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
