"""The console token: how strong it must be, and the files it is kept in.

Internal. :func:`check_token` refuses a token that is easy to guess, by two
estimates that catch different mistakes:

* zxcvbn (Dropbox's strength estimator) finds the patterns people use —
  dictionary words, repeats (``changeme-changeme-…``), sequences and digit runs,
  keyboard rows, dates, l33t spellings — and must estimate at least
  :data:`MIN_GUESSES_LOG10` (10^20) guesses. It counts a random character as ten
  guesses, so ``secrets.token_urlsafe(16)`` (128 random bits in 22 characters)
  scores about 10^22 and ``token_urlsafe(32)`` about 10^43;
* length * log2 of the alphabet the token draws from must reach
  :data:`MIN_TOKEN_BITS` (128), so a token is never short.

A token file holds the token alone, on one line. :func:`read_token_file` refuses
a file that other users can read or that anyone but its owner can change, and
warns when its group can read it. :func:`own_token_file` is the token ``mailfathom
web`` and ``mailfathom dev`` use when none is configured: read from a private file,
or made and written there (mode 0600, in a folder of mode 0700) on first use.
"""

from __future__ import annotations

import math
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from mailfathom.errors import ConfigurationError

__all__ = [
    "MAKE_TOKEN",
    "MIN_GUESSES_LOG10",
    "MIN_TOKEN_BITS",
    "TokenFile",
    "check_token",
    "default_token_path",
    "own_token_file",
    "read_token_file",
    "token_bits",
]

#: The command that makes a good token, quoted in every refusal.
MAKE_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'  # noqa: S105
#: zxcvbn must estimate at least 10 ** this many guesses.
MIN_GUESSES_LOG10 = 20
#: Length * log2(alphabet) must reach this.
MIN_TOKEN_BITS = 128
#: zxcvbn looks at this many characters at most (its own limit); longer tokens are
#: judged by their beginning, which never overrates them.
_ZXCVBN_LENGTH = 72
_PATTERN_NAMES = {
    "dictionary": "a word or common password",
    "repeat": "a repeat",
    "sequence": "a sequence",
    "spatial": "a keyboard pattern",
    "date": "a date",
    "regex": "a year or pattern",
}


def token_bits(token: str) -> float:
    """Length * log2(size of the alphabet the token draws from).

    The alphabet is the sum of the classes the token uses (26 lower-case letters,
    26 upper-case, 10 digits, 33 others). ``secrets.token_urlsafe(32)`` scores about 256.
    """
    pool = sum(
        size
        for present, size in (
            (any(c.islower() for c in token), 26),
            (any(c.isupper() for c in token), 26),
            (any(c.isdigit() for c in token), 10),
            (any(not c.isalnum() for c in token), 33),
        )
        if present
    )
    return len(token) * math.log2(pool) if pool > 1 else 0.0


def check_token(token: str) -> None:
    """Refuse a console token that is easy to guess, saying why and how to make a good one.

    Refused: any whitespace (it is lost or added too easily), fewer than
    :data:`MIN_TOKEN_BITS` bits by :func:`token_bits`, or fewer than 10 **
    :data:`MIN_GUESSES_LOG10` guesses by zxcvbn. The message names the patterns
    found, never the token.
    """
    problem = None
    if any(c.isspace() for c in token):
        problem = "contains whitespace"
    elif token_bits(token) < MIN_TOKEN_BITS:
        problem = (
            f"is too short ({len(token)} characters, about {token_bits(token):.0f} bits; "
            f"at least {MIN_TOKEN_BITS} are needed)"
        )
    else:
        from zxcvbn import zxcvbn  # here: loading its word lists takes a noticeable while

        found = zxcvbn(token[:_ZXCVBN_LENGTH])
        guesses = float(found["guesses_log10"])
        if guesses < MIN_GUESSES_LOG10:
            patterns = sorted(
                {
                    _PATTERN_NAMES[str(match["pattern"])]
                    for match in found["sequence"]
                    if str(match["pattern"]) in _PATTERN_NAMES
                }
            )
            made_of = f"it is made of {', '.join(patterns)}; " if patterns else ""
            problem = (
                f"is easy to guess ({made_of}about 10^{guesses:.0f} guesses, at least "
                f"10^{MIN_GUESSES_LOG10} are needed)"
            )
    if problem is not None:
        raise ConfigurationError(
            f"the console token {problem}: make a random one with {MAKE_TOKEN} and put it "
            "in MAILFATHOM_WEB_TOKEN or a file named by --token-file"
        )


@dataclass(frozen=True, slots=True)
class TokenFile:
    """A token read from a file, and what the operator should be told about the file."""

    token: str
    path: Path
    #: The token was made just now (the file did not exist).
    created: bool = False
    #: A warning to print (the file's group may read it), or None.
    warning: str | None = None


def read_token_file(path: Path) -> TokenFile:
    """The token in ``path`` (one line; surrounding whitespace ignored).

    Refused: a file that users other than its owner and group can read or change, or
    that its group can change (``chmod 600`` mends it). A file its group can read is
    accepted with a warning: every member of the group is an operator.
    """
    try:
        with path.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            gid = os.fstat(handle.fileno()).st_gid
            data = handle.read(64 * 1024)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"cannot read the console token from {str(path)!r} ({type(exc).__name__}): "
            "name a readable UTF-8 file holding only the token"
        ) from None
    if mode & (stat.S_IRWXO | stat.S_IWGRP):
        raise ConfigurationError(
            f"the console token file {str(path)!r} can be "
            f"{'read or changed' if mode & stat.S_IRWXO else 'changed'} by other users "
            f"(mode {stat.S_IMODE(mode):04o}): make it readable only by you with "
            f"chmod 600 {path}, and make a new token, since the old one may have been read"
        )
    token = text.strip()
    if not token or "\n" in token:
        raise ConfigurationError(
            f"{str(path)!r} must hold the console token alone, on one line: make one with "
            f"{MAKE_TOKEN} > {path}"
        )
    warning = None
    if mode & stat.S_IRGRP:
        warning = (
            f"warning: the console token file {path} is readable by the group "
            f"{_group_name(gid)}: every member of it can use the console; chmod 600 {path} "
            "unless you mean that"
        )
    return TokenFile(token, path, warning=warning)


def default_token_path() -> Path:
    """Where ``mailfathom web`` keeps the token it makes:
    ``$XDG_STATE_HOME/mailfathom/console-token`` (``~/.local/state/mailfathom/console-token``
    when ``XDG_STATE_HOME`` is unset)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "mailfathom" / "console-token"


def own_token_file(path: Path) -> TokenFile:
    """The token in ``path``, made (random, 256 bits) and written there first if the file
    does not exist: the file is created with mode 0600 (never through a symbolic link),
    its folder with 0700."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        made = secrets.token_urlsafe(32)
        descriptor = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except FileExistsError:
        return read_token_file(path)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the console token to {str(path)!r} ({exc.strerror}): give a token in "
            "MAILFATHOM_WEB_TOKEN or --token-file, or set XDG_STATE_HOME to a folder of yours"
        ) from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(made + "\n")
    return TokenFile(made, path, created=True)


def _group_name(gid: int) -> str:
    import grp  # here, not at the top: a POSIX-only module (no grp on Windows)

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
