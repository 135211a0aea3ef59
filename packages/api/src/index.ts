/**
 * @packageDocumentation
 * `@brine/api` is Brine's salt-api compatible REST API (Salt's `rest_cherrypy`), served by `brine-api`
 * beside the master.
 */
export { apiSettings, API_CLIENTS, type ApiSettings, type ApiClientName } from './config.js'
