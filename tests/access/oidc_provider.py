"""A small OpenID Connect provider for the login tests, served inside the test (no network):
discovery, JWKS, an authorization endpoint that signs in a user chosen by the test at
once, and a token endpoint that trades the code for an RS256-signed ID token. Only what
the authorization code flow needs; the client must authenticate with its secret."""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import RedirectResponse
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey


@dataclass
class Provider:
    """The provider's state: its issuer URL, the one client it knows, the user the next
    login signs in (with groups), and the codes handed out."""

    issuer: str
    client_id: str = "stacklens"
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    user: str = "alice"
    groups: list[str] = field(default_factory=list)
    key: RSAKey = field(
        default_factory=lambda: RSAKey.generate_key(
            2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"}, private=True
        )
    )
    codes: dict[str, dict] = field(default_factory=dict)

    def app(self) -> FastAPI:
        """The provider's HTTP endpoints."""
        app = FastAPI()

        @app.get("/.well-known/openid-configuration")
        def discovery() -> dict:
            return {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            }

        @app.get("/jwks")
        def jwks() -> dict:
            return dict(KeySet([self.key]).as_dict(private=False))

        @app.get("/authorize")
        def authorize(request: Request) -> RedirectResponse:
            q = request.query_params
            if q.get("client_id") != self.client_id or q.get("response_type") != "code":
                raise HTTPException(400, "unknown client or response type")
            code = secrets.token_urlsafe(16)
            self.codes[code] = {"nonce": q.get("nonce"), "redirect_uri": q["redirect_uri"],
                                "user": self.user, "groups": list(self.groups)}  # fmt: skip
            back = urlencode({"code": code, "state": q["state"]})
            return RedirectResponse(f"{q['redirect_uri']}?{back}", status_code=302)

        @app.post("/token")
        async def token(request: Request) -> dict:
            form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
            code, redirect_uri = form.get("code", ""), form.get("redirect_uri")
            authorization = request.headers.get("authorization", "")
            expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode())
            if authorization != f"Basic {expected.decode()}":
                raise HTTPException(401, "client authentication failed")
            grant = self.codes.pop(code, None)
            if grant is None or grant["redirect_uri"] != redirect_uri:
                raise HTTPException(400, "invalid_grant")
            now = int(time.time())
            claims = {"iss": self.issuer, "sub": f"sub-{grant['user']}", "aud": self.client_id,
                      "iat": now, "exp": now + 300, "nonce": grant["nonce"],
                      "preferred_username": grant["user"], "groups": grant["groups"]}  # fmt: skip
            id_token = jwt.encode({"alg": "RS256", "kid": "test-key"}, claims, self.key)
            return {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                    "expires_in": 300, "id_token": id_token}  # fmt: skip

        return app
