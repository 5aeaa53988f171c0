import { defineError } from '../../core/errors.js'

/** The `ports` plugin's errors (docs/errors.md): app preview URLs, `/apps/<chat>/<port>/…`. */
export const PORTS_INVALID_PORT = defineError('PORTS_INVALID_PORT', 'invalid_port', 'the port must be a number from 1024 to 65535', 400)
export const PORTS_RESERVED_PORT = defineError('PORTS_RESERVED_PORT', 'reserved_port', 'port %s belongs to the sandbox\'s own services (the browser\'s debugging port or the egress relay), not to an app', 403)
export const PORTS_SANDBOX_NOT_RUNNING = defineError('PORTS_SANDBOX_NOT_RUNNING', 'sandbox_not_running', 'the chat has no running sandbox: run a command in the chat to start it, then reload', 409)
export const PORTS_TOO_MANY_CONNECTIONS = defineError('PORTS_TOO_MANY_CONNECTIONS', 'too_many_connections', 'too many open connections to this chat\'s apps (%s); try again shortly', 429)
export const PORTS_REQUEST_TOO_LARGE = defineError('PORTS_REQUEST_TOO_LARGE', 'request_too_large', 'the request body exceeds %s bytes', 413)
export const PORTS_APP_UNREACHABLE = defineError('PORTS_APP_UNREACHABLE', 'app_unreachable', 'nothing answered on port %s in the sandbox: is the app running and listening on 127.0.0.1, ::1 or 0.0.0.0?', 502)
export const PORTS_BAD_ANSWER = defineError('PORTS_BAD_ANSWER', 'bad_app_answer', 'the app in the sandbox sent an answer that cannot be relayed: %s', 502)
export const PORTS_APP_TIMEOUT = defineError('PORTS_APP_TIMEOUT', 'app_timeout', 'the app in the sandbox did not answer within %s seconds', 504)
export const PORTS_APP_ORIGIN_UNKNOWN = defineError('PORTS_APP_ORIGIN_UNKNOWN', 'app_origin_unknown', 'this app address is not known to the server: open the app from its link in the chat or from the preview page\'s Apps view', 404)
export const PORTS_USE_APP_ORIGIN = defineError('PORTS_USE_APP_ORIGIN', 'use_app_origin', 'apps are served on their own origins here: connect to %s', 400)
