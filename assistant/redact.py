"""The one redactor: secrets never leave debug-stuck, and nothing harmless is blanked.

Reports, snapshots, watch events, the journal and everything copied or printed pass through here.
What counts as a secret:
- the value of an option or variable whose *name* says secret, read word by word (``--hf_token``,
  ``--api-key``, ``WANDB_API_KEY``, ``DB_PASSWORD``, ``--client_secret``), so that look-alikes stay
  (``TOKENIZERS_PARALLELISM``, ``--tokenizer_name``, ``--max_new_tokens``, ``--session_dir``,
  ``--token_budget``, ``--password_file``);
- the value of a key whose name says secret in a config dump, a dict or an override, wherever the
  key path ends in such a name (``api_key: X``, ``{"password": "X"}``, ``wandb.api_key=X``,
  ``+db.password=X``, ``aws_secret_access_key = X``);
- ``<service>-key`` / ``<service>_key`` for a service that hands out credentials (``--wandb-key``,
  ``OPENAI_KEY``), but not data field names (``--sort-key``, ``--metric_key``, ``--label_key``);
- the password in a URL's userinfo (``https://user:pa/ss@host`` keeps ``user`` and the host);
- the credentials of ``Authorization:`` (its scheme kept) and ``Cookie:`` headers;
- values shaped like known credentials wherever they appear (``hf_...``, ``ghp_...``, ``sk-...``,
  ``AKIA...``, ``xox.-...``, ``glpat-...``, JWTs, ``Bearer ...``).
A value that is a reference or a placeholder (``$HF_TOKEN``, ``${TOKEN}``, ``<token>``) is kept:
blanking it would break a printed command and hide nothing. In argv and commands the marker stands
as one quoted word (``'<redacted>'``): bare, bash would read ``<redacted>`` as a redirection.
"""

from __future__ import annotations

import functools
import re
import shlex
from typing import Any, Dict, Iterable, List, Optional

REDACTED = "<redacted>"

# A name is secret when its last word says so (HF_TOKEN, --password, --client_secret), or its last
# two words do (WANDB_API_KEY, AWS_SECRET_ACCESS_KEY). Earlier words only qualify: --token_budget,
# TOKEN_FILE or --password_file name a count or a path, not a secret.
SECRET_WORDS = frozenset(
    {
        "token",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "pass",
        "pat",
        "secret",
        "credential",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "authtoken",
        "cookie",
        "authorization",
    }
)
SECRET_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("auth", "key"), ("signing", "key")}
)
# `<word>-key` is a credential only when the word names a service that issues one: --wandb-key,
# HF_KEY. Training scripts are full of data field names ending in key (--sort-key, --metric_key,
# --label_key, --monitor_key): blanking those would break the printed command and hide nothing.
KEY_HOLDERS = frozenset(
    {
        "wandb", "hf", "huggingface", "openai", "anthropic", "claude", "gemini", "google", "cohere", "mistral",
        "groq", "together", "replicate", "deepseek", "comet", "neptune", "mlflow", "clearml", "aws", "azure",
        "gcp", "gcs", "s3", "api", "github", "gitlab", "slack", "pinecone", "encryption",
    }
)  # fmt: skip
# A tokenizer's special tokens (pad_token: "[PAD]", "eos_token": "</s>") fill every config dump.
TOKENIZER_WORDS = frozenset(
    {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "eot", "special", "start", "end", "image", "audio", "video"}
)

TOKEN_SHAPES = re.compile(
    r"\b("
    r"hf_[A-Za-z0-9]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9-]{8,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")"
)
BEARER = re.compile(r"(?i)\b(bearer|token)\s+([A-Za-z0-9._~+/=-]{16,})")
# The password runs to the last `@` before the host: passwords hold `/`, `+`, even `@`, unescaped.
# It stops at quotes, so that a URL inside JSON or a quoted word does not swallow what follows.
# A scheme is short: bounded, a long dotted word is not rescanned from each of its letters.
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,31}://)([^/\s:@]+):([^\s\"'`<>]*)@(?=[^\s@/?#]*(?:[/?#\s]|$))")
# host:port/path@... is a port and a path, not a password (https://h:8080/users/a@b.org)
PORT_AND_PATH = re.compile(r"\d{1,5}[/?#].*")
# --name=value / --name value inside free text (a log line, a note, a command string); after a
# space the value may start with `-` (--password -hunter2) but `--other` is the next option.
INLINE_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)(=|[ \t]+(?!--[A-Za-z]))(\"[^\"]*\"|'[^']*'|[^\s\"']+)")
# A key path as Hydra/OmegaConf overrides spell it (wandb.api_key, +db.password, ++a.b, ~x.secret),
# which covers plain names (HF_TOKEN) and config keys (api_key).
KEY_PATH = r"(?:\+\+?|~)?[A-Za-z_][\w-]*(?:\.[\w-]+)*"
# key=value, key = value (ini), key: value (YAML), "key": "value" (JSON), 'key': 'value' (a dict)
KEY_VALUE = re.compile(
    r"(?<![\w.$+~-])"
    r"(?:(?P<quote>[\"'])(?P<quoted>" + KEY_PATH + r")(?P=quote)(?P<qsep>[ \t]*[:=][ \t]*)"
    r"|(?P<name>" + KEY_PATH + r")(?P<sep>=|[ \t]+=[ \t]*|=[ \t]+|:[ \t]+))"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"
)
NOT_A_VALUE = frozenset({"none", "null", "nil", "~", "true", "false"})
# key: value as YAML (and config dumps) write it: a plain scalar runs to the end of the line, spaces
# and all (`password: my secret phrase`), up to a ` # comment`. Quoted, flow and block values are
# left to KEY_VALUE.
COLON_LINE_VALUE = re.compile(
    r"(?<![\w.$+~-])(?P<name>" + KEY_PATH + r")(?P<sep>:[ \t]+)"
    r"(?P<value>[^\s\"'\[{(|>&*!#<][^\n]*?)(?P<tail>[ \t]+#[^\n]*)?[ \t]*$",
    re.M,
)
HEADER_NAMES = r"(?:proxy-)?authorization|(?:set-)?cookie"
# "Authorization": "Bearer X" (a JSON or dict key) | "Authorization: Bearer X" (a quoted header, as
# curl -H takes it) | Authorization: Bearer X (a header line: the value runs to the end of the line)
HEADER_KEYED = re.compile(r"(?i)([\"'])(" + HEADER_NAMES + r")\1([ \t]*:[ \t]*)(\"[^\"\n]*\"|'[^'\n]*')")
HEADER_QUOTED = re.compile(r"(?i)([\"'])(" + HEADER_NAMES + r")([ \t]*:[ \t]*)((?:(?!\1)[^\r\n])*)")
HEADER_LINE = re.compile(r"(?i)(?<![\w\"'-])(" + HEADER_NAMES + r")([ \t]*:[ \t]*)([^\r\n]*)")
AUTH_SCHEME = re.compile(r"(?i)(basic|bearer|token|digest|negotiate|ntlm|aws4-hmac-sha256|apikey)(\s+)")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def name_words(name: str) -> List[str]:
    """--hf_token -> [hf, token]; WANDB_API_KEY -> [wandb, api, key]; apiKey -> [api, key]."""
    bare = name.lstrip("-+~")
    return [w for w in re.split(r"[-_.\s]+", _CAMEL.sub("_", bare).lower()) if w]


@functools.lru_cache(maxsize=4096)  # a report repeats its key names thousands of times
def is_secret_name(name: str) -> bool:
    words = name_words(name)
    if not words:
        return False
    if words[-1] == "token" and len(words) > 1 and words[-2] in TOKENIZER_WORDS:
        return False
    if words[-1] in SECRET_WORDS or tuple(words[-2:]) in SECRET_PAIRS:
        return True
    return len(words) > 1 and words[-1] == "key" and words[-2] in KEY_HOLDERS


def is_placeholder(value: str) -> bool:
    """$VAR, ${VAR}, <value>, {value}, *** and our own marker: references, not secrets."""
    v = value.strip().strip("\"'")
    return (
        not v
        or v.startswith("$")
        or (v.startswith("<") and v.endswith(">"))
        or (v.startswith("{") and v.endswith("}"))
        or set(v) <= {"*", "."}
    )


def _secret_value(value: str) -> str:
    if is_placeholder(value):
        return value
    quote = value[0] if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) > 1 else ""
    return f"{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """Free text (a log line, a note, a command string, a rendered report) with secrets replaced."""
    if not text:
        return text
    if len(text) <= 512:
        return _redact_short(text)
    return _redact_text(text)


@functools.lru_cache(maxsize=16384)  # frames and paths repeat across every rank and sample
def _redact_short(text: str) -> str:
    return _redact_text(text)


def _redact_text(text: str) -> str:
    text = _redact_urls(text)
    text = TOKEN_SHAPES.sub(REDACTED, text)
    text = _redact_headers(text)
    text = BEARER.sub(lambda m: f"{m.group(1)} {_secret_value(m.group(2))}", text)
    text = INLINE_OPTION.sub(
        lambda m: (
            m.group(0) if not is_secret_name(m.group(1)) else f"{m.group(1)}{m.group(2)}{_secret_value(m.group(3))}"
        ),
        text,
    )
    text = COLON_LINE_VALUE.sub(_colon_line_value, text)
    return KEY_VALUE.sub(_key_value, text)


def _colon_line_value(m: re.Match) -> str:
    name, value = m.group("name"), m.group("value")
    if " " not in value.strip() or not is_secret_name(name) or re.fullmatch(HEADER_NAMES, name, re.I):
        return m.group(0)  # one word: KEY_VALUE decides, with its own exceptions
    if any(c in value for c in "([{"):
        return m.group(0)  # code or a list, not a secret literal
    return f"{name}{m.group('sep')}{REDACTED}{m.group('tail') or ''}"


def _redact_urls(text: str) -> str:
    def userinfo(m: re.Match) -> str:
        if PORT_AND_PATH.fullmatch(m.group(3)):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}:{_secret_value(m.group(3))}@"

    return URL_USERINFO.sub(userinfo, text)


def _redact_headers(text: str) -> str:
    def keyed(m: re.Match) -> str:
        value = m.group(4)
        return f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{value[0]}{_credentials(value[1:-1])}{value[-1]}"

    text = HEADER_KEYED.sub(keyed, text)
    text = HEADER_QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{_credentials(m.group(4))}", text)
    return HEADER_LINE.sub(lambda m: f"{m.group(1)}{m.group(2)}{_credentials(m.group(3))}", text)


def _credentials(value: str) -> str:
    """A header's value with its scheme kept: `Basic <redacted>`, `<redacted>` for a cookie."""
    body = value.rstrip()
    trailing = value[len(body) :]
    scheme = AUTH_SCHEME.match(body)
    head = scheme.group(0) if scheme else ""
    secret = body[len(head) :]
    if not secret or is_placeholder(secret) or secret == REDACTED:
        return value
    return f"{head}{REDACTED}{trailing}"


def _key_value(m: re.Match) -> str:
    name = m.group("quoted") or m.group("name")
    value = m.group("value")
    if not is_secret_name(name) or re.fullmatch(HEADER_NAMES, name, re.I) or value.lower() in NOT_A_VALUE:
        return m.group(0)
    key = m.group(0)[: m.start("value") - m.start()]
    if value[:1] in "\"'":
        return key + _secret_value(value)
    spaced = m.group("sep") not in (None, "=")
    if spaced and any(c in value for c in "([{"):
        return m.group(0)  # code (`token = tokenizer(text)`) or a list, not a secret literal
    body = value.rstrip(",;)]}")
    return key + _secret_value(body) + value[len(body) :]


def redact_argv(argv: Iterable[str]) -> List[str]:
    """A command line with secret values replaced: ``--hf_token X``, ``--api-key=X``, ``HF_TOKEN=X``
    (an env prefix), ``wandb.api_key=X`` (a Hydra override), credentials in URLs and token-shaped
    values anywhere."""
    out: List[str] = []
    hide_next = False
    for raw in argv:
        arg = str(raw)
        # after a secret option the next word is its value, even `-hunter2`; `--next` is an option
        if hide_next and not NEXT_OPTION.fullmatch(arg):
            out.append(_secret_value(arg))
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-"):
            name, eq, value = arg.partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(f"{name}={_secret_value(value)}")
                else:
                    out.append(arg)
                    hide_next = True
                continue
            out.append(f"{name}={_redact_value(value)}" if eq else arg)
            continue
        name, eq, value = arg.partition("=")
        if eq and OVERRIDE_KEY.fullmatch(name) and is_secret_name(name):
            out.append(f"{name}={_secret_value(value)}")
        else:
            out.append(_redact_value(arg))
    return out


NEXT_OPTION = re.compile(r"--[A-Za-z][\w.-]*(=.*)?", re.S)
OVERRIDE_KEY = re.compile(KEY_PATH)


def _redact_value(value: str) -> str:
    """One argument or value that is not itself named secret: what its shape gives away, and any
    secret it carries inside (a URL, a header, a JSON or YAML snippet, a `bash -c` script)."""
    out = redact_text(value)
    return quote_markers(out) if out != value and any(c.isspace() for c in out) else out


def redacted_command_line(argv: Iterable[str]) -> str:
    """The command line to print: secrets replaced, every word quoted for the shell."""
    return join_command(redact_argv(argv))


def join_command(words: Iterable[str]) -> str:
    """shlex.join, but a marker inside a word is quoted alone (``HF_TOKEN='<redacted>'``,
    ``--api-key='<redacted>'``): quoting the whole word would turn an env prefix into a command."""
    return " ".join(_quote_word(w) for w in words)


def _quote_word(word: str) -> str:
    pieces = word.split(REDACTED)
    if len(pieces) == 1 or any(p and shlex.quote(p) != p for p in pieces):
        return shlex.quote(word)
    return shlex.quote(REDACTED).join(pieces)


# Text that a shell would expand or split on: re-joining its words would quote `$HF_TOKEN`, `|` or
# `&&` and change what the command does, so such commands are redacted as text.
SHELL_SYNTAX = re.compile(r"[|&;<>()$`\n]")


def redact_command(command: str) -> str:
    """A shell command line (as text) with secrets replaced; quoting kept where it can be."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return redact_shell(command)
    if SHELL_SYNTAX.search(command.replace(REDACTED, "")):
        return redact_shell(command)
    redacted = redact_argv(parts)
    if redacted == parts:
        return quote_markers(command)
    return join_command(redacted)


def redact_shell(text: str) -> str:
    """A shell snippet (a fix, a check) redacted as text, each marker left as one quoted word."""
    return quote_markers(redact_text(text))


def quote_markers(command: str) -> str:
    """Each bare ``<redacted>`` in a shell command quoted: bash would read it as a redirection.
    One inside quotes is left alone; the command still parses with shlex.split."""
    out: List[str] = []
    quote = ""
    i = 0
    while i < len(command):
        if not quote and command.startswith(REDACTED, i):
            out.append(shlex.quote(REDACTED))
            i += len(REDACTED)
            continue
        c = command[i]
        if c == "\\" and quote != "'":
            out.append(command[i : i + 2])
            i += 2
            continue
        if quote and c == quote:
            quote = ""
        elif not quote and c in "'\"":
            quote = c
        out.append(c)
        i += 1
    return "".join(out)


def redact_env(env: Dict[str, str]) -> Dict[str, str]:
    """Variables named like secrets blanked; the others keep their value unless it shows one."""
    out = {}
    for key, value in env.items():
        text = "" if value is None else str(value)
        out[key] = _secret_value(text) if (is_secret_name(key) and text) else _redact_value(text)
    return out


ARGV_KEYS = frozenset({"cmdline", "argv", "command"})
SHELL_KEYS = frozenset({"commands", "checks", "launch_command"})  # fixes and checks printed to be run


def redact_obj(obj: Any, key: Optional[str] = None) -> Any:
    """A JSON-like structure (a report, a snapshot, an event) with every secret replaced: values of
    secret-named keys, command lines, environments, and every string's own secrets."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            k_text = str(k)
            if isinstance(v, str) and v and is_secret_name(k_text):
                out[k] = _secret_value(v)
            else:
                out[k] = redact_obj(v, k_text)
        return out
    if isinstance(obj, list):
        if key in ARGV_KEYS and all(isinstance(x, str) for x in obj):
            return redact_argv(obj)
        if key in SHELL_KEYS:
            return [redact_shell(x) if isinstance(x, str) else redact_obj(x) for x in obj]
        return [redact_obj(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(x) for x in obj)
    if isinstance(obj, str):
        if key in ARGV_KEYS:
            return redact_command(obj)
        return redact_shell(obj) if key in SHELL_KEYS else redact_text(obj)
    return obj
