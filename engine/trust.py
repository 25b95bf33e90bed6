"""What may run code on this machine (see SECURITY.md).

Three inputs of checkray execute code when loaded, not just data:

* **pickles** (joblib files of scikit-learn models and validity heads): unpickling can call
  any function;
* **callable models** (``family: callable``, ``path: module:function``): importing runs the
  module;
* **``trust_remote_code``** in a Hugging Face model spec: transformers runs the repo's code.

A model registry, a zoo or a run directory may come from someone else, so none of these
is loaded unless the user says so with ``--trust-code`` (``runtime.trust_code: true``;
``CHECKRAY_TRUST_CODE=1`` in the environment, which is how Ray workers learn it). The one
exception is a pickle that checkray itself wrote for this user: its writer signs the
file's digest with a per-user key (HMAC-SHA256, ``~/.cache/checkray/trust.key``, mode 0600,
or ``CHECKRAY_TRUST_KEY`` set alike on every node of a cluster) in ``<file>.sig``, and a
file whose signature verifies is loaded without the flag, as Jupyter trusts notebooks
signed by the same user. A file edited after signing, or signed with another key, is not.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkray.engine.config import cache_root
from checkray.engine.errors import InputError

TRUST_ENV = "CHECKRAY_TRUST_CODE"
KEY_ENV = "CHECKRAY_TRUST_KEY"
SIGNATURE_SUFFIX = ".sig"


def code_trusted() -> bool:
    """True when the user allowed loading inputs that run code (``--trust-code``)."""
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes")


def allow_code(on: bool = True) -> None:
    """Set the trust switch for this process and the Ray workers it starts after this."""
    if on:
        os.environ[TRUST_ENV] = "1"
    else:
        os.environ.pop(TRUST_ENV, None)


def require_code_trust(what: str, why: str) -> None:
    """One-line refusal unless ``--trust-code`` was given."""
    if not code_trusted():
        raise InputError(
            f"{what}: {why}, which runs code from it; pass --trust-code (runtime.trust_code: true) "
            "if you trust where it came from (see SECURITY.md)"
        )


def _key() -> bytes:
    given = os.environ.get(KEY_ENV)
    if given:
        return given.encode()
    path = cache_root() / "trust.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # exclusive create: two processes making the key at once agree on one
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_hex(32).encode())
    return path.read_bytes()


def sign(data: bytes) -> str:
    """The signature checkray writes next to a pickle it made."""
    return hmac.new(_key(), hashlib.sha256(data).digest(), hashlib.sha256).hexdigest()


def signed_by_us(data: bytes, signature: str | None) -> bool:
    return bool(signature) and hmac.compare_digest(sign(data), signature.strip())


def load_pickle(path: str | Path, what: str, loader: Callable[[Any], Any] | None = None) -> Any:
    """Load a joblib/pickle file: allowed when checkray signed it for this user, or with
    ``--trust-code``; otherwise a one-line refusal. Load errors are one line too."""
    import joblib

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    sig_path = path.with_name(path.name + SIGNATURE_SUFFIX)
    signature = sig_path.read_text(encoding="utf-8", errors="replace") if sig_path.is_file() else None
    if not signed_by_us(data, signature):
        require_code_trust(what, f"{path} is a pickle that checkray did not write for this user")
    try:
        return (loader or joblib.load)(io.BytesIO(data))
    except Exception as exc:  # unpickling raises anything (EOFError, UnpicklingError, ImportError...)
        raise InputError(f"{what}: cannot load {path}: {type(exc).__name__}: {exc}") from None


def pickle_bytes(obj: Any) -> tuple[bytes, str]:
    """(joblib bytes, signature) for writing a pickle and its ``.sig`` next to it."""
    import joblib

    buf = io.BytesIO()
    joblib.dump(obj, buf, compress=3)
    data = buf.getvalue()
    return data, sign(data)
