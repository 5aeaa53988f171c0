"""
title: Cubicle — a computer per chat
description: Runs commands and edits files in this chat's own Linux sandbox on a Cubicle server (MCP over Streamable HTTP). Files attached to the chat appear in /mnt/user-data/uploads.
author: Cubicle
version: 0.1.0
license: Apache-2.0
"""

# Paste this file into Open WebUI: Workspace -> Tools -> "+" (see integrations/README.md).
# Python standard library only (Open WebUI ships pydantic, which is used for the Valves when present).
#
# Wire contract: docs/contract.md#open-webui of the Cubicle server. Per call the tool is an MCP client:
# initialize -> notifications/initialized -> tools/call, answers as JSON or as an SSE stream, sending
# Authorization, X-Chat-Id, X-User-Email, X-User-Name (percent-encoded) and X-Mcp-Servers. Before each
# call the chat's files are synced: GET /api/uploads/{chat}/manifest, then POST (multipart field
# `file`) only the files whose MD5 differs.
#
# What Open WebUI passes (docs: https://docs.openwebui.com/features/extensibility/plugin/development/reserved-args,
# source: backend/open_webui/utils/middleware.py builds the tool's extra params with
# "__files__": metadata.get("files", []) and "__metadata__": metadata):
#   __metadata__ = {"chat_id": "<uuid>", "message_id": ..., "session_id": ..., "files": [...], ...}
#   __user__     = {"id": ..., "email": ..., "name": ..., "role": ..., "valves": <UserValves>}
#   __files__    = [{"type": "file", "id": "<id>", "name": "<name>",
#                    "file": {"id": "<id>", "filename": "<name>", "path": "<storage path>",
#                             "meta": {"name": "<name>", "content_type": ..., "size": <n>}}}, ...]
# "path" is a local file under Open WebUI's upload dir, or a bucket URL with S3/GCS/Azure storage, which
# open_webui.storage.provider.Storage.get_file(path) turns into a local copy (as Open WebUI's own
# routers/files.py does before serving a file's content).

import asyncio
import hashlib
import inspect
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
import uuid
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
PROTOCOL_VERSION = "2025-06-18"
MAX_JSON_BYTES = 16 * 1024 * 1024  # one JSON-RPC answer (a view of an image is ~0.5 MiB)
MAX_ERROR_BYTES = 4096  # body of an HTTP error shown to the model
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MAX_FILES_PER_SYNC = 200
CHUNK = 256 * 1024

Emitter = Optional[Callable[[dict], Awaitable[None]]]


class CubicleError(Exception):
    """A failure with a message meant for the model (always starts with 'Error:')."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the API key to another address: refuse it.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        raise CubicleError(f"Error: the Cubicle server answered with a redirect ({code}) to {newurl}; set CUBICLE_URL to the final address")


_OPENER = urllib.request.build_opener(_NoRedirect)


def _read_bounded(resp, limit: int) -> bytes:
    data = resp.read(limit + 1)
    if len(data) > limit:
        raise CubicleError(f"Error: the Cubicle server's answer is larger than {limit} bytes")
    return data


def _http(method: str, url: str, headers: dict, body=None, timeout: float = 30.0):
    """Opens a request; HTTP errors become CubicleError with a clear text (the caller reads the body)."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        return _OPENER.open(req, timeout=timeout)
    except urllib.error.HTTPError as err:
        detail = ""
        try:
            detail = err.read(MAX_ERROR_BYTES).decode("utf-8", "replace").strip()
        except Exception:
            pass
        finally:
            err.close()
        if err.code == 401:
            raise CubicleError("Error: the Cubicle server refused the API key (HTTP 401). Set the tool's API_KEY valve to the server's MCP_API_KEY.") from None
        if err.code == 403:
            raise CubicleError(f"Error: the Cubicle server refused the credentials (HTTP 403: {detail[:300]}). Check the tool's API_KEY valve.") from None
        if err.code == 404:
            raise CubicleError(f"Error: nothing at {url} (HTTP 404). Is CUBICLE_URL the server's base URL (without /mcp)?") from None
        raise CubicleError(f"Error: the Cubicle server answered HTTP {err.code} for {method} {urllib.parse.urlsplit(url).path}: {detail[:500]}") from None
    except CubicleError:
        raise
    except (socket.timeout, TimeoutError):
        raise CubicleError(f"Error: the Cubicle server at {url} did not answer within {timeout:g} s") from None
    except urllib.error.URLError as err:
        raise CubicleError(f"Error: cannot reach the Cubicle server at {url} ({err.reason}). CUBICLE_URL must be the address Open WebUI's backend reaches, e.g. http://cubicle:8081") from None
    except (OSError, ValueError) as err:
        raise CubicleError(f"Error: request to the Cubicle server failed: {err}") from None


def _clean(value: Any, limit: int = 1024) -> str:
    """A header value: text without control characters (no header injection), bounded."""
    text = "" if value is None else str(value)
    return "".join(ch for ch in text if ch >= " " and ch != "\x7f")[:limit].strip()


def _safe_name(raw: Any) -> str:
    """An upload file name the server accepts (docs/contract.md#path-rules): one segment, no controls, <= 255 bytes."""
    name = _clean(raw, 1024).replace("/", "_").replace("\\", "_")
    if name in ("", ".", ".."):
        name = "file"
    while len(name.encode("utf-8")) > 255:
        stem, dot, ext = name.rpartition(".")
        name = (stem[:-1] + dot + ext) if dot and len(ext) < 20 and stem else name[:-1]
    return name


def _md5(path: str) -> str:
    try:
        digest = hashlib.md5(usedforsecurity=False)  # an integrity check, not security (FIPS builds)
    except TypeError:
        digest = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


class _MultipartFile:
    """A streamed multipart/form-data body with one field `file` (http.client reads it in blocks)."""

    def __init__(self, path: str, name: str, size: int) -> None:
        self.boundary = "cubicle-" + uuid.uuid4().hex
        quoted = name.replace("\\", "\\\\").replace('"', '\\"')
        self._head = (f'--{self.boundary}\r\nContent-Disposition: form-data; name="file"; filename="{quoted}"\r\n'
                      "Content-Type: application/octet-stream\r\n\r\n").encode("utf-8")
        self._tail = f"\r\n--{self.boundary}--\r\n".encode("ascii")
        self.length = len(self._head) + size + len(self._tail)
        self._parts = [self._head, None, self._tail]
        self._fh = open(path, "rb")

    def read(self, n: int = -1) -> bytes:
        while self._parts:
            part = self._parts[0]
            if part is None:
                block = self._fh.read(CHUNK if n is None or n < 0 else n)
                if block:
                    return block
                self._fh.close()
                self._parts.pop(0)
                continue
            self._parts.pop(0)
            return part
        return b""

    def close(self) -> None:
        self._fh.close()


class _SseReader:
    """Reads `event: message` / `data:` events from an SSE response, with bounded lines and total."""

    def __init__(self, resp, limit: int) -> None:
        self.resp, self.left = resp, limit

    def events(self):
        data: list = []
        while True:
            line = self.resp.readline(MAX_JSON_BYTES + 2)
            if not line:
                return
            self.left -= len(line)
            if self.left < 0 or (len(line) > MAX_JSON_BYTES and not line.endswith(b"\n")):
                raise CubicleError("Error: the Cubicle server's event stream exceeded its size bound")
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text == "":
                if data:
                    yield "\n".join(data)
                    data = []
            elif text.startswith("data:"):
                data.append(text[5:][1:] if text[5:].startswith(" ") else text[5:])
            # comments (": keep-alive"), id:, retry: and event: lines carry nothing we need


class McpCall:
    """One tool call as a fresh MCP client (blocking; run it in a thread). cancel() may be called from another thread."""

    def __init__(self, base_url: str, headers: dict, idle_timeout: float, on_progress: Callable[[dict], None]) -> None:
        self.url = base_url.rstrip("/") + "/mcp"
        self.headers = {**headers, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        self.timeout = idle_timeout
        self.on_progress = on_progress
        self.session: Optional[str] = None
        self.version = PROTOCOL_VERSION
        self._resp = None
        self._cancelled = False

    def _post(self, message: dict):
        headers = dict(self.headers)
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if message.get("method") != "initialize":
            headers["MCP-Protocol-Version"] = self.version
        return _http("POST", self.url, headers, json.dumps(message).encode("utf-8"), self.timeout)

    def _answer(self, resp, request_id: Any) -> dict:
        """The JSON-RPC response to request_id from a JSON or SSE reply; progress goes to on_progress."""
        ctype = (resp.headers.get("Content-Type") or "").lower()
        if ctype.startswith("text/event-stream"):
            for payload in _SseReader(resp, 64 * MAX_JSON_BYTES).events():
                try:
                    msg = json.loads(payload)
                except ValueError:
                    continue
                for item in msg if isinstance(msg, list) else [msg]:
                    if not isinstance(item, dict):
                        continue
                    if item.get("method") == "notifications/progress":
                        self.on_progress(item.get("params") or {})
                    elif item.get("id") == request_id and ("result" in item or "error" in item):
                        return item
            if self._cancelled:
                raise CubicleError("Error: the call was cancelled")
            raise CubicleError("Error: the Cubicle server closed the stream before answering (the sandbox or the server may have restarted)")
        try:
            msg = json.loads(_read_bounded(resp, MAX_JSON_BYTES))
        except ValueError:
            raise CubicleError(f"Error: the Cubicle server sent a reply that is not JSON (Content-Type {ctype or 'missing'})") from None
        for item in msg if isinstance(msg, list) else [msg]:
            if isinstance(item, dict) and item.get("id") == request_id:
                return item
        raise CubicleError("Error: the Cubicle server's reply did not answer the request")

    def _rpc(self, request_id: int, method: str, params: dict) -> dict:
        resp = self._post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        self._resp = resp
        try:
            if method == "initialize":
                self.session = resp.headers.get("Mcp-Session-Id") or None
            answer = self._answer(resp, request_id)
        finally:
            resp.close()
            self._resp = None
        if "error" in answer:
            err = answer.get("error") or {}
            raise CubicleError(f"Error: MCP error {err.get('code')}: {_clean(err.get('message'), 500)}")
        return answer.get("result") or {}

    def call(self, name: str, arguments: dict) -> dict:
        init = self._rpc(1, "initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                           "clientInfo": {"name": "cubicle-open-webui-tool", "version": VERSION}})
        self.version = str(init.get("protocolVersion") or PROTOCOL_VERSION)
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}).close()
        if self._cancelled:
            raise CubicleError("Error: the call was cancelled")
        params = {"name": name, "arguments": arguments, "_meta": {"progressToken": uuid.uuid4().hex}}
        return self._rpc(2, "tools/call", params)

    def cancel(self) -> None:
        """Tells the server to stop the running call (it kills the process group) and drops the stream."""
        self._cancelled = True
        try:
            self._post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 2, "reason": "cancelled in Open WebUI"}}).close()
        except Exception:
            pass
        resp = self._resp
        if resp is not None:
            try:
                resp.close()
            except Exception:
                pass


def result_text(result: dict) -> str:
    """The MCP CallToolResult as the text Open WebUI hands to the model."""
    parts = []
    for block in result.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "image":
            size = len(str(block.get("data", ""))) * 3 // 4
            parts.append(f"[image {block.get('mimeType', '')}, {size // 1024} KiB: not shown through this tool; link it from /mnt/user-data/outputs to show it to the user]")
        elif kind == "resource":
            res = block.get("resource") or {}
            parts.append(str(res.get("text") or f"[resource {res.get('uri', '')}]"))
    text = "\n".join(parts)
    if result.get("isError") and not text.startswith("Error"):
        text = "Error: " + text
    return text or "[No output]"


class UploadSync:
    """Brings the chat's files to the server: manifest, MD5, upload only what changed (blocking)."""

    def __init__(self, base_url: str, headers: dict, chat_id: str, max_bytes: int, timeout: float, md5_cache: "OrderedDict") -> None:
        self.base = base_url.rstrip("/") + "/api/uploads/" + urllib.parse.quote(chat_id, safe="")
        self.headers = {k: v for k, v in headers.items() if k == "Authorization"}
        self.max_bytes, self.timeout, self.cache = max_bytes, timeout, md5_cache

    def _digest(self, path: str, st: os.stat_result) -> str:
        key = (path, st.st_size, st.st_mtime_ns)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        value = _md5(path)
        self.cache[key] = value
        while len(self.cache) > 512:
            self.cache.popitem(last=False)
        return value

    def _upload(self, path: str, name: str, size: int) -> None:
        body = _MultipartFile(path, name, size)
        headers = {**self.headers, "Content-Type": f"multipart/form-data; boundary={body.boundary}", "Content-Length": str(body.length)}
        try:
            resp = _http("POST", f"{self.base}/{urllib.parse.quote(name, safe='')}", headers, body, max(self.timeout, 300.0))
            resp.close()
        finally:
            body.close()

    def run(self, files: list) -> dict:
        """files: [(name, local path)]. Returns {"uploaded": [...], "unchanged": n, "problems": [...]}."""
        resp = _http("GET", f"{self.base}/manifest", self.headers, None, self.timeout)
        try:
            manifest = json.loads(_read_bounded(resp, MAX_MANIFEST_BYTES))
        except ValueError:
            raise CubicleError("Error: the upload manifest is not JSON") from None
        finally:
            resp.close()
        if not isinstance(manifest, dict):
            manifest = {}
        report: dict = {"uploaded": [], "unchanged": 0, "problems": []}
        for name, path in files:
            try:
                st = os.stat(path)
                if st.st_size > self.max_bytes:
                    report["problems"].append(f"{name}: {st.st_size} bytes is over the {self.max_bytes}-byte upload limit")
                    continue
                if manifest.get(name) == self._digest(path, st):
                    report["unchanged"] += 1
                    continue
                self._upload(path, name, st.st_size)
                report["uploaded"].append(name)
            except CubicleError as err:
                report["problems"].append(f"{name}: {str(err)[len('Error: '):]}")
            except OSError as err:
                report["problems"].append(f"{name}: cannot read it in Open WebUI's storage ({err.strerror or err})")
        return report


def _storage_local_path(path: str) -> str:
    """Inside Open WebUI: a local copy for cloud storage (S3/GCS/Azure); outside: the path itself."""
    try:
        from open_webui.storage.provider import Storage  # type: ignore
    except Exception:
        return path
    return Storage.get_file(path)


async def _file_path(item: dict) -> Optional[str]:
    """The storage path of one __files__ entry; looks the record up by id when the entry carries none."""
    info = item.get("file") if isinstance(item.get("file"), dict) else {}
    path = info.get("path")
    if isinstance(path, str) and path:
        return path
    file_id = info.get("id") or item.get("id")
    if not file_id:
        return None
    try:
        from open_webui.models.files import Files  # type: ignore
    except Exception:
        return None
    record = Files.get_file_by_id(file_id)
    if inspect.isawaitable(record):
        record = await record
    return getattr(record, "path", None) or None


def chat_files(entries: Any) -> list:
    """(upload name, storage path or None) for each attached file; knowledge collections and web results are skipped."""
    out, seen = [], set()
    for item in entries if isinstance(entries, list) else []:
        if not isinstance(item, dict) or item.get("type", "file") != "file":
            continue
        info = item.get("file") if isinstance(item.get("file"), dict) else {}
        meta = info.get("meta") if isinstance(info.get("meta"), dict) else {}
        key = info.get("id") or item.get("id") or info.get("path")
        if key in seen:
            continue
        seen.add(key)
        out.append((_safe_name(meta.get("name") or info.get("filename") or item.get("name")), item))
        if len(out) >= MAX_FILES_PER_SYNC:
            break
    names: dict = {}
    unique = []
    for name, item in out:  # two different files with one name: the later ones get " (2)", " (3)"
        n = names.get(name, 0) + 1
        names[name] = n
        if n > 1:
            stem, dot, ext = name.rpartition(".")
            name = f"{stem} ({n}).{ext}" if dot and stem else f"{name} ({n})"
        unique.append((name, item))
    return unique


async def _emit(emitter: Emitter, description: str, done: bool = False) -> None:
    if emitter is None:
        return
    try:
        await emitter({"type": "status", "data": {"description": description, "done": done, "hidden": False}})
    except Exception:
        pass  # a closed browser tab must not fail the call


class Tools:
    class Valves(BaseModel):
        CUBICLE_URL: str = Field(default="http://cubicle:8081", description="Internal URL of the Cubicle server as Open WebUI's backend reaches it (not PUBLIC_BASE_URL; no /mcp).")
        API_KEY: str = Field(default="", description="The server's MCP_API_KEY (empty only for a server in open mode).", json_schema_extra=SECRET_INPUT)
        MCP_SERVERS: str = Field(default="", description="Comma-separated MCP server names for sub_agent (X-Mcp-Servers), e.g. github,jira.")
        SEND_USER_INFO: bool = Field(default=True, description="Send the user's email and name (git author, per-user skills).")
        SYNC_UPLOADS: bool = Field(default=True, description="Copy the chat's attached files to /mnt/user-data/uploads before each call.")
        MAX_UPLOAD_MB: int = Field(default=100, description="Largest file to sync (the server's UPLOAD_MAX_BYTES is 100 MiB by default).")
        IDLE_TIMEOUT: int = Field(default=60, description="Seconds without any byte from the server before a call fails (the server sends a keep-alive every 15 s).")

    class UserValves(BaseModel):
        MCP_SERVERS: str = Field(default="", description="Your MCP servers for sub_agent (overrides the admin's list).")
        GITLAB_TOKEN: str = Field(default="", description="Becomes GITLAB_TOKEN in your sandbox.", json_schema_extra=SECRET_INPUT)
        GITLAB_HOST: str = Field(default="", description="Becomes GITLAB_HOST (default gitlab.com).")

    def __init__(self) -> None:
        self.valves = self.Valves()
        self._md5_cache: OrderedDict = OrderedDict()

    def _headers(self, chat_id: str, user: Optional[dict]) -> dict:
        v = self.valves
        headers = {"X-Chat-Id": chat_id, "User-Agent": f"cubicle-open-webui-tool/{VERSION}"}
        if _clean(v.API_KEY):
            headers["Authorization"] = "Bearer " + _clean(v.API_KEY)
        user = user if isinstance(user, dict) else {}
        if v.SEND_USER_INFO:
            email = _clean(user.get("email"), 254)
            if email and email.isascii():
                headers["X-User-Email"] = email
            name = _clean(user.get("name"), 128)
            if name:
                headers["X-User-Name"] = urllib.parse.quote(name, safe="")
        uv = user.get("valves")
        get = (lambda key: _clean(getattr(uv, key, "") if not isinstance(uv, dict) else uv.get(key, ""), 4096)) if uv is not None else (lambda key: "")
        servers = get("MCP_SERVERS") or _clean(v.MCP_SERVERS)
        if servers:
            headers["X-Mcp-Servers"] = servers
        for key, header in (("GITLAB_TOKEN", "X-Gitlab-Token"), ("GITLAB_HOST", "X-Gitlab-Host")):
            if get(key).isascii() and get(key):
                headers[header] = get(key)
        return headers

    async def _sync(self, chat_id: str, headers: dict, files: Any, emitter: Emitter) -> str:
        """Syncs uploads; returns a note for the model when something could not be synced, else ''."""
        entries = chat_files(files)
        if not entries:
            return ""
        await _emit(emitter, f"Syncing {len(entries)} attached file(s) to the sandbox…")
        local, problems = [], []
        for name, item in entries:
            try:
                path = await _file_path(item)
                if path is None:
                    problems.append(f"{name}: Open WebUI gave no storage path for it")
                    continue
                local.append((name, await asyncio.to_thread(_storage_local_path, path)))
            except Exception as err:  # storage backends raise their own errors
                problems.append(f"{name}: cannot open it in Open WebUI's storage ({_clean(err, 200)})")
        sync = UploadSync(self.valves.CUBICLE_URL, headers, chat_id, int(self.valves.MAX_UPLOAD_MB) * 1024 * 1024, float(self.valves.IDLE_TIMEOUT), self._md5_cache)
        try:
            report = await asyncio.to_thread(sync.run, local)
        except CubicleError as err:
            return f"\n\n[Note: attached files were not synced: {str(err)[len('Error: '):]}]"
        problems += report["problems"]
        if report["uploaded"]:
            await _emit(emitter, f"Uploaded {', '.join(report['uploaded'])} to /mnt/user-data/uploads")
        else:
            await _emit(emitter, "Attached files are up to date in the sandbox")
        return f"\n\n[Note: not in /mnt/user-data/uploads: {'; '.join(problems)}]" if problems else ""

    async def _run(self, tool: str, arguments: dict, user: Optional[dict], metadata: Optional[dict], files: Any, emitter: Emitter, chat_id: Optional[str]) -> str:
        metadata = metadata if isinstance(metadata, dict) else {}
        chat = _clean(metadata.get("chat_id") or chat_id, 256)
        if not chat:
            return "Error: no chat id: Open WebUI passes one only for chats (not for direct API calls), and the sandbox belongs to the chat."
        headers = self._headers(chat, user)
        note = ""
        if self.valves.SYNC_UPLOADS:
            note = await self._sync(chat, headers, files if files is not None else metadata.get("files"), emitter)
        label = _clean(arguments.get("description") or tool, 80)
        await _emit(emitter, f"{tool}: {label}")
        loop = asyncio.get_running_loop()
        progress: asyncio.Queue = asyncio.Queue()
        call = McpCall(self.valves.CUBICLE_URL, headers, float(self.valves.IDLE_TIMEOUT), lambda p: loop.call_soon_threadsafe(progress.put_nowait, p))
        task = asyncio.ensure_future(asyncio.to_thread(call.call, tool, arguments))
        try:
            while not task.done():
                getter = asyncio.ensure_future(progress.get())
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    message = str(getter.result().get("message") or f"{tool} running…")
                    await _emit(emitter, _clean(message.replace("\n", " "), 300))  # "Running: … (45s)\n→ last line"
                else:
                    getter.cancel()
            result = task.result()
        except CubicleError as err:
            await _emit(emitter, f"{tool} failed", done=True)
            return str(err) + note
        except asyncio.CancelledError:
            await asyncio.to_thread(call.cancel)
            raise
        except Exception as err:  # never an exception into Open WebUI: the model gets a clear text
            await _emit(emitter, f"{tool} failed", done=True)
            return f"Error: the Cubicle tool failed: {type(err).__name__}: {_clean(err, 500)}" + note
        await _emit(emitter, f"{tool}: done", done=True)
        return result_text(result) + note

    async def bash_tool(self, command: str, description: str = "", __user__: Optional[dict] = None, __metadata__: Optional[dict] = None,
                        __files__: Optional[list] = None, __event_emitter__: Emitter = None, __chat_id__: Optional[str] = None) -> str:
        """
        Run a bash command in this chat's own Linux sandbox (user assistant, cwd /home/assistant, which persists between turns). Files attached to the chat are in /mnt/user-data/uploads (read-only); put deliverables in /mnt/user-data/outputs, they get public links. If you lost track of the environment (chat id, file links, skills), read /home/assistant/README.md. Background long jobs with output redirected.
        :param command: The bash command to run.
        :param description: Why the command runs, in a few words (shown as progress).
        """
        return await self._run("bash_tool", {"command": command, "description": description or command[:60]}, __user__, __metadata__, __files__, __event_emitter__, __chat_id__)

    async def view(self, path: str, description: str = "", view_range: Optional[list[int]] = None, __user__: Optional[dict] = None,
                   __metadata__: Optional[dict] = None, __files__: Optional[list] = None, __event_emitter__: Emitter = None, __chat_id__: Optional[str] = None) -> str:
        """
        View a text file with line numbers, or list a directory (two levels), in this chat's sandbox. Read /home/assistant/README.md with it when you lost track of the environment.
        :param path: Absolute path, or relative to /home/assistant.
        :param description: Why you look at it, in a few words.
        :param view_range: Optional [start, end] line numbers (1-based, end -1 = to the end of the file).
        """
        args: dict = {"path": path, "description": description or f"view {path}"[:60]}
        if view_range is not None:
            args["view_range"] = view_range
        return await self._run("view", args, __user__, __metadata__, __files__, __event_emitter__, __chat_id__)

    async def create_file(self, description: str, path: str, file_text: str, __user__: Optional[dict] = None, __metadata__: Optional[dict] = None,
                          __files__: Optional[list] = None, __event_emitter__: Emitter = None, __chat_id__: Optional[str] = None) -> str:
        """
        Create or overwrite a file in this chat's sandbox (parent directories are created). Files under /mnt/user-data/outputs get a public link.
        :param description: Why the file is written, in a few words (give it first).
        :param path: Absolute path, or relative to /home/assistant.
        :param file_text: The complete content of the file (give it last).
        """
        return await self._run("create_file", {"description": description, "path": path, "file_text": file_text}, __user__, __metadata__, __files__, __event_emitter__, __chat_id__)

    async def str_replace(self, description: str, path: str, old_str: str, new_str: str = "", __user__: Optional[dict] = None, __metadata__: Optional[dict] = None,
                          __files__: Optional[list] = None, __event_emitter__: Emitter = None, __chat_id__: Optional[str] = None) -> str:
        """
        Replace exactly one occurrence of old_str in a text file of this chat's sandbox (it must match exactly once; include surrounding lines to make it unique).
        :param description: Why the edit is made, in a few words (give it first).
        :param path: Absolute path, or relative to /home/assistant.
        :param old_str: The exact text to replace.
        :param new_str: The replacement (empty deletes old_str).
        """
        return await self._run("str_replace", {"description": description, "path": path, "old_str": old_str, "new_str": new_str}, __user__, __metadata__, __files__, __event_emitter__, __chat_id__)

    async def sub_agent(self, task: str, description: str, model: str = "", max_turns: int = 0, working_directory: str = "/home/assistant", resume_session_id: str = "",
                        __user__: Optional[dict] = None, __metadata__: Optional[dict] = None, __files__: Optional[list] = None, __event_emitter__: Emitter = None,
                        __chat_id__: Optional[str] = None) -> str:
        """
        Hand a long, iterative coding task to an autonomous coding agent (CLI) inside this chat's sandbox. Costly: a last resort for work that needs many edit-run cycles; read /mnt/skills/public/sub-agent/SKILL.md first. Continue an earlier run with resume_session_id.
        :param task: The complete task, with everything the agent needs to know.
        :param description: What the agent works on, in a few words.
        :param model: Optional model name (empty = the server's default).
        :param max_turns: Optional turn limit (0 = the server's default).
        :param working_directory: Directory the agent works in.
        :param resume_session_id: Session id from an earlier sub_agent result to continue it.
        """
        args = {"task": task, "description": description, "model": model, "max_turns": max_turns, "working_directory": working_directory, "resume_session_id": resume_session_id}
        return await self._run("sub_agent", args, __user__, __metadata__, __files__, __event_emitter__, __chat_id__)
