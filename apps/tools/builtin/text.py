"""Text as the file tools see it: decoding (UTF-8, BOMs, Latin-1 fallback, binary sniffing) so
a file writes back byte-for-byte, lines numbered like editors and `ast`, and numbered windows."""

from __future__ import annotations

from dataclasses import dataclass

BINARY_SNIFF_BYTES = 8192
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


@dataclass(frozen=True)
class TextFile:
    """A decoded file, with what it takes to write it back byte-for-byte."""

    text: str  # line endings as in the file
    encoding: str  # codec for text.encode(); "utf-8" also covers plain ASCII
    bom: bytes = b""

    @property
    def crlf(self) -> bool:
        """True when every line break is CRLF (mixed files are edited as they are)."""
        crlf = self.text.count("\r\n")
        return crlf > 0 and crlf == self.text.count("\n")

    def encode(self, text: str) -> bytes:
        return self.bom + text.encode(self.encoding)


def looks_binary(data: bytes) -> bool:
    head = data[:BINARY_SNIFF_BYTES]
    if any(head.startswith(bom) for bom, _ in _BOMS):
        return False
    return b"\x00" in head


def decode_text(data: bytes) -> TextFile | None:
    """Decode a file's bytes, or None when they are binary. UTF-8 (with or without BOM) and
    UTF-16/32 with BOM are recognised; anything else that is not binary is read as Latin-1, which
    maps every byte to one character and so writes back unchanged."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return TextFile(data[len(bom) :].decode(encoding), encoding, bom)
            except UnicodeDecodeError:
                return None
    if looks_binary(data):
        return None
    try:
        return TextFile(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        pass
    sample = data[:BINARY_SNIFF_BYTES]
    control = sum(1 for byte in sample if byte < 32 and byte not in b"\t\n\r\f\v\x1b")
    if sample and control / len(sample) > 0.05:
        return None
    return TextFile(data.decode("latin-1"), "latin-1")


def split_lines(text: str) -> list[str]:
    """Lines without their terminators, numbered like editors and `ast` do ("\\n" separated; a
    final newline does not start another line). A "\\r" before "\\n" stays on its line."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


# --- showing lines -------------------------------------------------------------------------------

MAX_LINE_CHARS = 2000  # longer lines (minified code, data) are cut when shown


def number_line(number: int, line: str, width: int = 1) -> str:
    """One line as view and read_file show it: the number right-aligned to `width` digits, a tab,
    the text. Callers pass the width of the largest number they show, so a 20-line file costs
    two characters of padding per line, not cat -n's six."""
    line = line.removesuffix("\r")
    if len(line) > MAX_LINE_CHARS:
        line = (
            f"{line[:MAX_LINE_CHARS]}… [{len(line) - MAX_LINE_CHARS} more characters on this line]"
        )
    return f"{number:{width}}\t{line}"


def numbered_window(lines: list[str], first: int, last: int, *, budget: int) -> tuple[str, int]:
    """Lines first..last (1-based, inclusive) with numbers, stopping before `budget` characters
    (at least one line is shown). Numbers are right-aligned to the width of `last`. Returns the
    text and the number of the last line shown."""
    out: list[str] = []
    used = 0
    shown = first - 1
    width = len(str(last))
    for number in range(first, last + 1):
        entry = number_line(number, lines[number - 1], width)
        if out and used + len(entry) + 1 > budget:
            break
        out.append(entry)
        used += len(entry) + 1
        shown = number
    return "\n".join(out), shown
