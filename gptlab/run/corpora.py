"""The named corpora `data.dataset` can give: a registry of sources, and how a missing one is obtained.

Each entry is a `DatasetSource`: the file's sha256 (the corpus *is* that exact file: a copy with another
checksum is refused, unless the user names it with `data.path`), and either a URL to download it from
or a preparer that builds it from published data (`python -m gptlab.prepare NAME`). A plugin adds one:

    from gptlab.run.corpora import DATASETS, DatasetSource
    DATASETS.register("mytext")(DatasetSource(url="https://.../mytext.txt", sha256="...",
                                              description="my corpus"))

Where a file is looked for (`$GPTLAB_DATA_DIR`, the cache), how it is split and tokenized: `data`.
"""
from __future__ import annotations

import hashlib
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from gptlab.errors import GptlabError
from gptlab.registry import Registry
from gptlab.runio import atomic_write


@dataclass(frozen=True)
class DatasetSource:
    """Where a named corpus comes from and how to recognise an intact copy."""

    url: str | None  # canonical download address; None where the file is built by `prepare` instead
    sha256: str  # checksum of the exact file: the corpus is this file
    description: str = ""  # one line for `--list`: what the text is
    filename: str = "input.txt"  # file name under <data dir>/<dataset>/
    prepare: Callable[[str, Path], bytes] | None = None  # (published data's address, scratch dir) -> the file's bytes
    published: str = ""  # the address `prepare` reads by default (a URL prefix or a local folder)
    needs: str = ""  # what `prepare` needs installed, e.g. "rdata" (named in its errors)

    @property
    def obtain(self) -> str:
        """How a user gets the file: the command that prepares it, or the download the lab does itself."""
        if self.prepare is not None:
            install = f"pip install {self.needs} && " if self.needs else ""
            return f"{install}python -m gptlab.prepare {{name}}"
        return f"downloaded from {self.url} on first use"


CORPUS_KEYS = ("data.dataset", "data.path")  # the run settings that choose the text a run trains and is scored on

DATASETS: Registry[DatasetSource] = Registry("data.dataset", "named corpora (or any UTF-8 file as data.path)")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: Path, sha256: str | None = None, timeout: float = 30.0) -> Path:
    """Download `url` to `dest` atomically, checking the sha256 if given (a mismatch saves nothing)."""

    def fetch(out: BinaryIO) -> None:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=timeout) as response:
            for chunk in iter(lambda: response.read(1 << 16), b""):
                digest.update(chunk)
                out.write(chunk)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise GptlabError(
                f"download from {url} has sha256 {digest.hexdigest()[:12]}..., expected {sha256[:12]}...; "
                "nothing was saved"
            )

    atomic_write(dest, fetch)
    return dest


DATASETS.register("tinyshakespeare")(DatasetSource(
    url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
    sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    description="Tiny Shakespeare (Karpathy's char-rnn): 1,115,394 chars of the plays, 65 distinct",
))


# Jane Austen's six novels from the janeaustenr R package, release 1.0.0 (MIT; the novels are public domain,
# from Project Gutenberg): one .rda file per novel, each a character vector of the book's lines.
AUSTEN_PUBLISHED = "https://raw.githubusercontent.com/juliasilge/janeaustenr/v1.0.0/data"
AUSTEN_BOOKS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")


def prepare_austen(published: str, scratch: Path) -> bytes:
    """The six novels in publication order, each one's lines joined by newlines and stripped, one blank line
    between books, UTF-8, from the package's .rda files."""
    try:
        import rdata
    except ImportError:
        raise GptlabError("preparing austen reads R data files: pip install rdata, then run this again") from None
    books = []
    for book in AUSTEN_BOOKS:
        local = fetch_published(published, f"{book}.rda", scratch)
        try:
            lines = rdata.read_rda(local)[book]
        except Exception as err:  # a damaged or foreign file: rdata raises many kinds
            raise GptlabError(f"{book}.rda from {published} is not the janeaustenr data file it should be "
                              f"({type(err).__name__}: {err})") from None
        books.append("\n".join(str(line) for line in lines).strip() + "\n")
    return "\n\n".join(books).encode("utf-8")


def fetch_published(published: str, name: str, scratch: Path) -> Path:
    """`name` under `published` (a URL prefix or a local folder) as a local file (downloaded into `scratch`)."""
    if "://" not in published:
        local = Path(published).expanduser() / name
        if not local.is_file():
            raise GptlabError(f"--from: {local} does not exist")
        return local
    try:
        return download(f"{published.rstrip('/')}/{name}", scratch / name)
    except OSError as err:  # URLError and timeouts are OSErrors
        raise GptlabError(f"could not download {published.rstrip('/')}/{name} ({err}); check the network, or "
                          "give --from a folder holding the files") from None


DATASETS.register("austen")(DatasetSource(
    url=None,
    sha256="32432b75ad045648fc586b923f9d38cddee6ecfa14cfe8968b9a028c36a19c23",
    description="Jane Austen's six novels (janeaustenr 1.0.0): 4,025,038 chars, 81 distinct",
    prepare=prepare_austen,
    published=AUSTEN_PUBLISHED,
    needs="rdata",
))


def prepare_dataset(name: str, dest: Path, published: str | None = None) -> Path:
    """Build dataset `name` at `dest` from its published data, verified against its sha256 before anything
    is written (a mismatch writes nothing). Returns `dest`."""
    from gptlab.runio import atomic_write_bytes

    source = DATASETS.get(name)
    if source.prepare is None:
        raise GptlabError(f"dataset '{name}' is downloaded, not prepared: the lab fetches it from {source.url} "
                          "on first use")
    with tempfile.TemporaryDirectory(prefix="gptlab-prepare-") as scratch:
        data = source.prepare(published or source.published, Path(scratch))
    actual = hashlib.sha256(data).hexdigest()
    if actual != source.sha256:
        raise GptlabError(f"the {name} text built from {published or source.published} has sha256 {actual[:12]}..., "
                          f"expected {source.sha256[:12]}...; nothing was written")
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(dest, data)
    return dest
