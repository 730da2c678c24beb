"""OIDC login (auth_mode=oidc) with Authlib: /auth/login sends the browser to the
provider, /auth/callback takes the code back, checks the ID token (signature against the
provider's JWKS, issuer, audience, nonce) and keeps the user name and groups in the signed
session cookie (Starlette's SessionMiddleware, valid `session_hours`); /auth/logout ends
it. The provider is found by its discovery document, `<issuer>/.well-known/
openid-configuration`. A provider that cannot be reached is a 503 JSON answer, a refused
or unverifiable login a 401."""

from __future__ import annotations

import httpx2
from authlib.integrations.starlette_client import OAuth, OAuthError  # type: ignore[import-untyped]
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from server.access.viewer import Access


def oidc_router(access: Access) -> APIRouter:
    """The login routes for the provider `access` names."""
    oauth = OAuth()
    provider = oauth.register(
        "provider",
        client_id=access.oidc_client_id,
        client_secret=access.oidc_client_secret,
        server_metadata_url=f"{access.oidc_issuer}/.well-known/openid-configuration",
        client_kwargs={"scope": "openid profile"},
    )
    router = APIRouter(prefix="/auth", tags=["auth"], include_in_schema=False)

    @router.get("/login")
    async def login(request: Request) -> Response:
        """Start a login at the provider; it comes back to /auth/callback."""
        try:
            redirect: Response = await provider.authorize_redirect(
                request, str(request.url_for("oidc_callback"))
            )
        except (httpx2.HTTPError, ValueError) as exc:
            return _unreachable(exc)
        return redirect

    @router.get("/callback", name="oidc_callback")
    async def callback(request: Request) -> Response:
        """The provider's answer: a session for the user its ID token names, then the
        dashboard; 401 if the provider refused or the token does not verify."""
        try:
            token = await provider.authorize_access_token(request)
        except OAuthError as exc:
            return JSONResponse({"detail": f"login failed: {exc.description or exc.error}"}, 401)
        except (httpx2.HTTPError, ValueError) as exc:
            return _unreachable(exc)
        claims = token.get("userinfo") or {}
        user = claims.get(access.oidc_user_claim)
        if not isinstance(user, str) or not user:
            detail = f"login failed: the ID token has no {access.oidc_user_claim!r} claim"
            return JSONResponse({"detail": detail}, 401)
        groups = claims.get(access.oidc_groups_claim) or []
        request.session.clear()
        request.session.update(user=user, groups=[g for g in groups if isinstance(g, str)])
        return RedirectResponse("/", status_code=302)

    @router.get("/logout")
    async def logout(request: Request) -> RedirectResponse:
        """End the session."""
        request.session.clear()
        return RedirectResponse("/auth/login", status_code=302)

    def _unreachable(exc: Exception) -> JSONResponse:
        detail = f"the login provider {access.oidc_issuer!r} cannot be reached: {exc}"
        return JSONResponse({"detail": detail}, 503)

    return router
