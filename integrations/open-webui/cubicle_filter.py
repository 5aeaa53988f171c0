"""
title: Cubicle — sandbox guide and file buttons
description: Puts this chat's sandbox guide (GET /system-prompt of a Cubicle server) into the system prompt, and adds "Open preview" / "Download all" buttons to answers that link the chat's files.
author: Cubicle
version: 0.1.0
license: Apache-2.0
"""

# Paste this file into Open WebUI: Admin Panel -> Functions -> "+" (a Filter; see integrations/README.md),
# enable it, and attach it to the models that have the Cubicle tool (or make it global).
# Python standard library only (pydantic is used for the Valves when present, as in Open WebUI).
#
# Wire contract: docs/contract.md#open-webui of the Cubicle server.
#   inlet:  GET <CUBICLE_URL>/system-prompt?chat_id=<id>&user_email=<email> with the bearer key; the body
#           becomes a block of the system message (a previous Cubicle block is replaced, never stacked);
#           the headers X-Public-Base-URL, X-Preview-URL, X-Archive-URL, X-Files-Base-URL carry the links.
#   outlet: assistant messages containing <PUBLIC>/files/<chat>/ get the preview and archive buttons, once.
# Open WebUI passes the chat id as __metadata__["chat_id"] (inlet) and body["chat_id"] (outlet); see
# https://docs.openwebui.com/features/extensibility/plugin/development/reserved-args (__chat_id__: "A Filter's
# stream() and outlet() do not get it ... Read body["chat_id"] there instead").

import asyncio
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from typing import Any, Awaitable, Callable, Optional

try:
    from pydantic import BaseModel, Field
except ImportError:  # outside Open WebUI (tests): plain attributes with the same defaults

    class BaseModel:  # type: ignore[no-redef]
        def __init__(self, **values: Any) -> None:
            for name in getattr(type(self), "__annotations__", {}):
                setattr(self, name, values.get(name, getattr(type(self), name, None)))

    def Field(default: Any = None, **_: Any) -> Any:  # type: ignore[no-redef]
        return default

# Open WebUI's valve forms show a property whose JSON schema has "input": {"type": "password"} as a
# masked field (its SensitiveInput) instead of clear text: every key and token valve is declared so.
SECRET_INPUT = {"input": {"type": "password"}}


VERSION = "0.1.0"
BEGIN = "<!-- cubicle:sandbox-guide:begin -->"
END = "<!-- cubicle:sandbox-guide:end -->"
BUTTONS = "<!-- cubicle:buttons -->"
MAX_PROMPT_BYTES = 256 * 1024  # the server's render stays under 32 KiB
LINKS_TTL_S = 600

Emitter = Optional[Callable[[dict], Awaitable[None]]]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # a redirect would carry the key elsewhere
        raise urllib.error.URLError(f"redirect ({code}) to {newurl}; set CUBICLE_URL to the final address")


_OPENER = urllib.request.build_opener(_NoRedirect)


def _clean(value: Any, limit: int = 1024) -> str:
    text = "" if value is None else str(value)
    return "".join(ch for ch in text if ch >= " " and ch != "\x7f")[:limit].strip()


def strip_block(text: str) -> str:
    """text without any Cubicle guide block (linear scan, no regex over user text)."""
    out, pos = [], 0
    while True:
        start = text.find(BEGIN, pos)
        if start < 0:
            out.append(text[pos:])
            break
        out.append(text[pos:start])
        end = text.find(END, start)
        if end < 0:  # a truncated block: drop the rest
            break
        pos = end + len(END)
    return "".join(out).strip()


def inject(messages: list, guide: str) -> list:
    """Puts the guide block into the first system message (replacing an earlier block) or adds one."""
    block = f"{BEGIN}\n{guide.strip()}\n{END}"
    for msg in messages:
        if not isinstance(msg, dict) or msg.get("role") != "system":
            continue
        content = msg.get("content")
        if isinstance(content, list):  # multimodal form: text parts
            parts = [p for p in content if not (isinstance(p, dict) and BEGIN in str(p.get("text", "")))]
            msg["content"] = parts + [{"type": "text", "text": block}]
        else:
            rest = strip_block(str(content or ""))
            msg["content"] = f"{rest}\n\n{block}" if rest else block
        return messages
    return [{"role": "system", "content": block}] + messages


def remove_blocks(messages: list) -> None:
    for msg in messages:
        if isinstance(msg, dict) and msg.get("role") == "system" and isinstance(msg.get("content"), str) and BEGIN in msg["content"]:
            msg["content"] = strip_block(msg["content"])


class Filter:
    class Valves(BaseModel):
        priority: int = Field(default=0, description="Filter order (lower runs first).")
        CUBICLE_URL: str = Field(default="http://cubicle:8081", description="Internal URL of the Cubicle server as Open WebUI's backend reaches it (not PUBLIC_BASE_URL).")
        API_KEY: str = Field(default="", description="The server's MCP_API_KEY.", json_schema_extra=SECRET_INPUT)
        INJECT_GUIDE: bool = Field(default=True, description="Add the chat's sandbox guide to the system prompt.")
        PREVIEW_BUTTON: bool = Field(default=True, description="Add 'Open preview' (carries the chat's control token: whoever reads the chat can use its preview and terminal).")
        ARCHIVE_BUTTON: bool = Field(default=True, description="Add 'Download all files (.zip)'.")
        TIMEOUT: int = Field(default=10, description="Seconds to wait for the Cubicle server.")

    def __init__(self) -> None:
        self.valves = self.Valves()
        self._links: OrderedDict = OrderedDict()  # chat id -> (time, links) from the inlet, for the outlet

    def _fetch(self, method: str, chat_id: str, email: str) -> tuple:
        query = {"chat_id": chat_id}
        if email:
            query["user_email"] = email
        url = self.valves.CUBICLE_URL.rstrip("/") + "/system-prompt?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        headers = {"User-Agent": f"cubicle-open-webui-filter/{VERSION}"}
        if _clean(self.valves.API_KEY):
            headers["Authorization"] = "Bearer " + _clean(self.valves.API_KEY)
        try:
            with _OPENER.open(urllib.request.Request(url, method=method, headers=headers), timeout=float(self.valves.TIMEOUT)) as resp:
                text = resp.read(MAX_PROMPT_BYTES + 1).decode("utf-8", "replace") if method == "GET" else ""
                links = {key: _clean(resp.headers.get(header), 4096) for key, header in (
                    ("public", "X-Public-Base-URL"), ("preview", "X-Preview-URL"), ("archive", "X-Archive-URL"), ("files", "X-Files-Base-URL"))}
        except urllib.error.HTTPError as err:
            err.close()
            hint = " (check the filter's API_KEY valve)" if err.code in (401, 403) else ""
            raise RuntimeError(f"GET /system-prompt answered HTTP {err.code}{hint}") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise RuntimeError(f"cannot reach the Cubicle server at {self.valves.CUBICLE_URL} ({getattr(err, 'reason', err)})") from None
        if len(text) > MAX_PROMPT_BYTES:
            raise RuntimeError("the sandbox guide is larger than expected")
        self._links[chat_id] = (time.monotonic(), links)
        self._links.move_to_end(chat_id)
        while len(self._links) > 1000:
            self._links.popitem(last=False)
        return text, links

    async def inlet(self, body: dict, __user__: Optional[dict] = None, __metadata__: Optional[dict] = None, __event_emitter__: Emitter = None) -> dict:
        metadata = __metadata__ if isinstance(__metadata__, dict) else (body.get("metadata") or {})
        chat_id = _clean(metadata.get("chat_id"), 256).lower()
        messages = body.get("messages")
        if not self.valves.INJECT_GUIDE or not chat_id or metadata.get("task") or not isinstance(messages, list):
            return body  # no chat (direct API call) or a background task (title, tags): nothing to add
        email = _clean((__user__ or {}).get("email"), 254)
        try:
            guide, _ = await asyncio.to_thread(self._fetch, "GET", chat_id, email)
        except RuntimeError as err:
            remove_blocks(messages)  # an old guide would carry links of an earlier state; better none
            if __event_emitter__ is not None:
                try:
                    await __event_emitter__({"type": "status", "data": {"description": f"Cubicle: sandbox guide not loaded: {err}", "done": True}})
                except Exception:
                    pass
            return body
        body["messages"] = inject(messages, guide)
        return body

    def _buttons(self, links: dict) -> str:
        items = []
        if self.valves.PREVIEW_BUTTON and links.get("preview"):
            items.append(f"[🖥️ Open preview]({links['preview']})")
        if self.valves.ARCHIVE_BUTTON and links.get("archive"):
            items.append(f"[📦 Download all files (.zip)]({links['archive']})")
        return f"\n\n{BUTTONS}\n" + " · ".join(items) if items else ""

    async def outlet(self, body: dict, __user__: Optional[dict] = None, __metadata__: Optional[dict] = None) -> dict:
        metadata = __metadata__ if isinstance(__metadata__, dict) else {}
        chat_id = _clean(body.get("chat_id") or metadata.get("chat_id"), 256).lower()
        messages = body.get("messages")
        if not chat_id or not isinstance(messages, list) or not (self.valves.PREVIEW_BUTTON or self.valves.ARCHIVE_BUTTON):
            return body
        candidates = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
                      and isinstance(m.get("content"), str) and BUTTONS not in m["content"] and "/files/" in m["content"]]
        if not candidates:
            return body
        cached = self._links.get(chat_id)
        links = cached[1] if cached and time.monotonic() - cached[0] < LINKS_TTL_S else None
        if links is None:
            try:  # HEAD: the headers without rendering the body for us
                _, links = await asyncio.to_thread(self._fetch, "HEAD", chat_id, _clean((__user__ or {}).get("email"), 254))
            except RuntimeError:
                return body  # no buttons rather than a broken answer
        public = links.get("public", "").rstrip("/")
        if not public:
            return body
        prefixes = {f"{public}/files/{chat_id}/", f"{public}/files/{urllib.parse.quote(chat_id, safe='')}/"}
        buttons = self._buttons(links)
        for msg in candidates:
            if buttons and any(p in msg["content"] for p in prefixes):
                msg["content"] = msg["content"].rstrip() + buttons
        return body
