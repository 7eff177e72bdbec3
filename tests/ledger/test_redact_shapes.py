"""Every documented secret shape, in every place a run records text, is absent
from the bytes each sink stores; ordinary text is kept as it is."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import attrs
import pytest

from ledger import REDACTED, JsonlSink, MemorySink, Record, SqliteSink, redact, redact_record

from ._helpers import fixed_clock


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


@attrs.frozen
class Shape:
    name: str
    text: str
    """Text holding the secret, as a model, a tool or a user would write it."""
    secret: str
    """The part that must not be stored."""


SHAPES = [
    Shape("openai", "use sk-proj-Q7vX2mN9pL4kR8tW1yZ3 now", "sk-proj-Q7vX2mN9pL4kR8tW1yZ3"),
    Shape("anthropic", "key=sk-ant-api03-Jh5Gf7Dd9Ss2Aa4Qq6Ww8Ee0Rr", "Jh5Gf7Dd9Ss2Aa4Qq6Ww8Ee0Rr"),
    Shape(
        "github", "token ghp_Xy9Wv8Ut7Sr6Qp5On4Ml3Kj2Ih1Gf0EdCb", "Xy9Wv8Ut7Sr6Qp5On4Ml3Kj2Ih1Gf0"
    ),
    Shape("github-oauth", "gho_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0", "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0"),
    Shape(
        "github-pat",
        "pat github_pat_11ABCDEFG0aBcDeFgHiJkLmNoPqRsTuV end",
        "11ABCDEFG0aBcDeFgHiJkLmNoPqRsTuV",
    ),
    Shape("gitlab", "GL glpat-Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh", "Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh"),
    Shape(
        "huggingface", "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", "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"
    ),
    Shape("slack", "bot xoxb-123456789012-AbCdEfGhIjKl", "123456789012-AbCdEfGhIjKl"),
    Shape("stripe-secret", "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    Shape("stripe-restricted", "rk_live_51H8AbCdEfGhIjKlMnOpQr ok", "51H8AbCdEfGhIjKlMnOpQr"),
    Shape(
        "google",
        "maps AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
        "SyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
    ),
    Shape("aws-key-id", "id AKIAIOSFODNN7EXAMPLE.", "AKIAIOSFODNN7EXAMPLE"),
    Shape(
        "aws-secret-unlabelled",
        "creds wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY done",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    Shape(
        "aws-secret-labelled",
        "aws_secret_access_key = Hx9/Lk2+Qw8Rt5Yu1Io3Pa6Sd4Fg7Jh0Kl2Zx9Cv",
        "Hx9/Lk2+Qw8Rt5Yu1Io3Pa6Sd4Fg7Jh0Kl2Zx9Cv",
    ),
    Shape(
        "jwt",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    Shape("bearer", "Authorization: Bearer Zm9vYmFyYmF6LnRva2Vu", "Zm9vYmFyYmF6LnRva2Vu"),
    Shape("token-scheme", "Authorization: Token 7c6b5a4d3e2f1g0h", "7c6b5a4d3e2f1g0h"),
    Shape("basic", "authorization: Basic dXNlcjpodW50ZXIy\r\nHost: x", "dXNlcjpodW50ZXIy"),
    Shape(
        "proxy-authorization",
        "Proxy-Authorization: Negotiate YIIGhgYJKoZIhvcSAQICAQBuggZ1",
        "YIIGhgYJKoZIhvcSAQICAQBuggZ1",
    ),
    Shape(
        "header-in-json",
        '{"headers": {"Authorization": "Custom k9Hd7Jk2Lm"}}',
        "k9Hd7Jk2Lm",
    ),
    Shape("json-key", '{"sk-proj-Lm3Nb5Vc7Xz9As1Df2Gh": "x"}', "Lm3Nb5Vc7Xz9As1Df2Gh"),
    Shape(
        "json-escaped-prefix", '{"v": "s\\u006b-proj-Pp9Oo8Ii7Uu6Yy5Tt4Rr"}', "Pp9Oo8Ii7Uu6Yy5Tt4Rr"
    ),
    Shape(
        "json-escaped-github",
        '["gh\\u0070_Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0"]',
        "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0",
    ),
    Shape("escaped-in-text", "log: s\\u006b-ant-Zz9Yy8Xx7Ww6Vv5Uu4Tt3 x", "Zz9Yy8Xx7Ww6Vv5Uu4Tt3"),
    Shape(
        "double-encoded-json",
        json.dumps(json.dumps({"password": "Dbl-Enc-Pw-4411", "n": 1})),
        "Dbl-Enc-Pw-4411",
    ),
    Shape("escaped-json-in-text", 'body={\\"api_key\\": \\"Esc9Js8On7\\"}', "Esc9Js8On7"),
    Shape(
        "url-userinfo",
        "git clone https://deploy:Tr0ub4dor-3xyz@git.example.com/r.git",
        "Tr0ub4dor-3xyz",
    ),
    Shape(
        "database-url",
        "DATABASE_URL=postgres://app:Pg-Pass-8812@db:5432/app",
        "Pg-Pass-8812",
    ),
    Shape(
        "mongo-uri",
        "MONGO_URI=mongodb+srv://cluster0.example.net/?authSource=admin&tk=Mg7Kq2Lp",
        "Mg7Kq2Lp",
    ),
    Shape(
        "pem",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7Vx\nq9Zt\n"
        "-----END RSA PRIVATE KEY-----\n",
        "MIIEpAIBAAKCAQEA7Vx",
    ),
    Shape(
        "pem-truncated",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n(cut)",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    Shape(
        "base64-of-key",
        "blob " + _b64("key sk-proj-Bb2Nn4Mm6Kk8Jj0Hh1Gg3"),
        _b64("key sk-proj-Bb2Nn4Mm6Kk8Jj0Hh1Gg3"),
    ),
    Shape(
        "multi-word-password",
        "password: correct horse battery staple\nnext",
        "horse battery staple",
    ),
    Shape("mysql", "mysql -u root -pMy5qlPa55 app", "My5qlPa55"),
    Shape("mysqldump-quoted", "mysqldump -h db -p'pa ss 77' app", "pa ss 77"),
    Shape("api-key-pair", "?api_key=Ab12Cd34&q=1", "Ab12Cd34"),
    Shape("quoted-secret", "client_secret='sp ace 9y'", "sp ace 9y"),
    Shape(
        "key-named-key", "key=0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"
    ),
]

PLACES = (
    "prompt",
    "model text",
    "tool arguments",
    "tool error",
    "tool result",
    "tool name",
    "call id",
)


def records_for(text: str) -> list[Record]:
    """``text`` in each place a run records text."""
    return [
        Record("prompt", "r", ("a/0001",), "a", arguments=text),
        Record("model_response", "r", ("a/0001",), "a", result=text),
        Record("tool_request", "r", ("a/0001",), "a", tool="http", call_id="c1", arguments=text),
        Record("tool_result", "r", ("a/0001",), "a", tool="http", call_id="c1", error=text),
        Record("tool_result", "r", ("a/0001",), "a", tool="http", call_id="c1", result=text),
        Record("tool_request", "r", ("a/0001",), "a", tool=text, call_id="c2", arguments="{}"),
        Record("tool_request", "r", ("a/0001",), "a", tool="http", call_id=text, arguments="{}"),
    ]


def forms(secret: str) -> list[bytes]:
    """The secret as stored text could spell it: raw, JSON-escaped, base64, \\u-escaped."""
    return [
        secret.encode(),
        json.dumps(secret)[1:-1].encode(),
        _b64(secret).encode(),
        _escaped(secret).encode(),
        json.dumps(_escaped(secret))[1:-1].encode(),
    ]


def stored_bytes(directory: Path, name: str) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob(name + "*")))


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
async def test_no_shape_reaches_any_sink(shape: Shape, tmp_path: Path) -> None:
    assert shape.secret in shape.text
    records = records_for(shape.text)
    memory = MemorySink(clock=fixed_clock)
    jsonl = JsonlSink(tmp_path / "ledger.jsonl", clock=fixed_clock)
    sqlite = SqliteSink(tmp_path / "ledger.db", clock=fixed_clock)
    for sink in (memory, jsonl, sqlite):
        for record in records:
            entry = await sink.record(record)
            if entry is None:  # a MemorySink chains on read
                entry = memory.entries[-1]
            assert REDACTED in repr(entry), (shape.name, record)
        await sink.aclose()
    stored = {
        "memory": repr(memory.entries).encode(),
        "jsonl": stored_bytes(tmp_path, "ledger.jsonl"),
        "sqlite": stored_bytes(tmp_path, "ledger.db"),
    }
    for sink_name, data in stored.items():
        for form in forms(shape.secret):
            assert form not in data, (shape.name, sink_name, form)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_each_place_is_redacted_and_stays_redacted(shape: Shape) -> None:
    once = redact(shape.text)
    assert REDACTED in once
    assert redact(once) == once
    for place, record in zip(PLACES, records_for(shape.text), strict=True):
        entry_text = repr(attrs.asdict(redact_record(record)))
        assert shape.secret not in entry_text, place


KEPT = [
    "git 3f786850e387550fdab836ed7e6dc881de23001b",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "SHA1 DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "ledger hash 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    "prev_hash=0000000000000000000000000000000000000000000000000000000000000000",
    "ThisIsAVeryLongJavaIdentifierName1234567",
    "AbstractSingletonProxyFactoryBean1234abc",
    "def tokenize(text: str) -> list[str]:\n    return text.split()  # the key idea",
    "The bearer of bad news read the passwords chapter and the keynote.",
    "see https://docs.python.org/3/library/re.html#module-re for details",
    "mail alice@example.com about the author",
    "ssh -p 2222 host && mkdir -p /tmp/x",
    "max_tokens=512 input_tokens: 12 token_count=3 auth_url=https://x/y",
    '{"query": "trio nurseries", "tokens": 5, "keyword": "x"}',
    "C:\\Users\\bob\\AppData\\Local\\Temp\\file.txt",
    "/home/user/project/src/very_long_module_name_for_tests.py",
    "password: null",
]


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact(text) is text
