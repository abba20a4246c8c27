// The exchange an adapter proxies when no client is connected to it (a stored request the
// queue runs, a further page the gateway fetches for itself): http-proxy-3 reads the method
// and headers from it and watches it for a client leaving, which never happens here (the
// call's signal stops it instead).
import { Socket } from 'node:net'
import type { UpstreamRequest } from '../backends/port.ts'
import { http } from '../http/node-http.ts'

const { IncomingMessage, ServerResponse } = http

export function detachedClient(method: string, path: string): UpstreamRequest['client'] {
  const req = new IncomingMessage(new Socket())
  req.method = method
  req.url = path
  req.headers = {}
  return { req, res: new ServerResponse(req) }
}
