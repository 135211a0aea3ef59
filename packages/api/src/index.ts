/**
 * @packageDocumentation
 * `@brine/api` is Brine's salt-api compatible REST API (Salt's `rest_cherrypy`), served by `brine-api`
 * beside the master on fastify 5: `/login` and `/token` turn eauth credentials into a master token (the
 * `X-Auth-Token` header or the `session_id` cookie), `POST /` and `/run` run lowstate chunks through the
 * `local`, `local_async`, `runner`, `runner_async`, `wheel` and `wheel_async` clients that
 * `netapi_enable_clients` enables, `/minions`, `/jobs`, `/keys`, `/hook` and `/stats` are salt-api's
 * convenience endpoints, and `/events` (server-sent events) and `/ws` (salt-api's websocket, with
 * `format_events`) stream the master's bus, every reader bounded. It serves the web console (`@brine/console`) at `/app`, or SaltGUI, as salt-api does (`app`,
 * `app_path`, `static`, `static_path`). The master checks every call's credentials and ACL; the API only carries them.
 */
export { apiSettings, API_CLIENTS, type ApiSettings, type ApiClientName } from './config.js'
export { ApiServer, createApiApp, parseForm, SESSION_COOKIE, type ApiAppOptions, type ApiServerOptions } from './server.js'
export { ApiMasterClient } from './api-master-client.js'
export { runChunk, chunkCredentials, type Chunk } from './lowstate.js'
export { EventStreams, sseRecord, sseSink, type EventSink, type EventStreamsOptions, type EventStreamStats } from './sse.js'
export { EventFormatter, FORMAT_EVENTS_MAX_JOBS, websocketSink, WS_READY, wsRecord } from './ws.js'
export { chooseResponseType, RESPONSE_TYPES, type ResponseType } from './negotiate.js'
export { CONSOLE_CSP, registerApp } from './app.js'
export { ApiError, ApiStartError, REFUSED_HEADER } from './errors.js'
