"""A fake LTI platform on 127.0.0.1 and an RSA key pair, for the tests of ``course grades --post``
(tests/course_grader/grading/test_lms.py) and the semester on ngshare (tests/course/test_ngshare_exchange.py)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from course_grader.grading.lms import SCORE_MEDIA_TYPE, SCORE_SCOPE


def rsa_key_pair() -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


class FakePlatform:
    """An LTI platform's token endpoint (client credentials with a JWT assertion, checked against
    the tool's public key) and line items' ``/scores`` endpoints (bearer token and content type
    checked), recording every score it accepts."""

    CLIENT_ID, KID, TOKEN = "course-tool", "key-1", "access-token-42"

    def __init__(self, public_key: str) -> None:
        self.public_key = public_key
        self.scores: list[tuple[str, dict]] = []
        self.refused: list[str] = []
        self.tokens_issued = 0
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/token":
                    problem = platform.check_token_request(urllib.parse.parse_qs(body.decode()))
                    if problem:
                        platform.refused.append(problem)
                        return self._reply(400, {"error": "invalid_client", "error_description": problem})
                    platform.tokens_issued += 1
                    return self._reply(200, {"access_token": platform.TOKEN, "token_type": "Bearer",
                                             "expires_in": 3600, "scope": SCORE_SCOPE})
                if not self.path.endswith("/scores"):
                    return self._reply(404, {})
                if self.headers.get("Authorization") != f"Bearer {platform.TOKEN}":
                    platform.refused.append(f"bad bearer token on {self.path}")
                    return self._reply(401, {"error": "unauthorized"})
                if self.headers.get("Content-Type") != SCORE_MEDIA_TYPE:
                    platform.refused.append(f"content type {self.headers.get('Content-Type')} on {self.path}")
                    return self._reply(415, {"error": "unsupported media type"})
                platform.scores.append((self.path.removesuffix("/scores"), json.loads(body)))
                return self._reply(200, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def check_token_request(self, form: dict[str, list[str]]) -> str:
        import jwt

        field = {k: v[0] for k, v in form.items()}
        if field.get("grant_type") != "client_credentials":
            return f"grant_type {field.get('grant_type')!r}"
        if field.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return "client_assertion_type"
        if SCORE_SCOPE not in field.get("scope", "").split():
            return "scope"
        assertion = field.get("client_assertion", "")
        try:
            claims = jwt.decode(assertion, self.public_key, algorithms=["RS256"], audience=f"{self.url}/token")
        except jwt.PyJWTError as error:
            return f"assertion: {error}"
        if claims.get("iss") != self.CLIENT_ID or claims.get("sub") != self.CLIENT_ID or not claims.get("jti"):
            return "assertion claims"
        if jwt.get_unverified_header(assertion).get("kid") != self.KID:
            return "kid"
        return ""

    def __enter__(self) -> FakePlatform:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
