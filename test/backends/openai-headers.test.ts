import http from 'node:http'
import t from 'tap'
import { credentialHeaders, rewriteOutgoingHeaders } from '../../src/backends/openai/outgoing-headers.ts'

t.test('the gateway key goes in the header each upstream expects', async (t) => {
  t.same(credentialHeaders('api.openai.com', 'sk-1'), { authorization: 'Bearer sk-1' })
  t.same(credentialHeaders('my-res.openai.azure.com', 'az-1'), { 'api-key': 'az-1' })
  t.same(credentialHeaders('MY-RES.cognitiveservices.azure.com', 'az-2'), { 'api-key': 'az-2' })
  t.same(
    credentialHeaders('openai.azure.com.evil.example', 'sk-3'),
    { authorization: 'Bearer sk-3' },
    'a look-alike host is not Azure',
  )
  t.same(credentialHeaders('127.0.0.1', undefined), {})
})

t.test('client credentials, framing and x-tollgate-* are removed whatever their case; ours are set', async (t) => {
  // A request that is never sent: only its header table is exercised.
  const req = http.request('http://127.0.0.1:9/', {
    headers: {
      Authorization: 'Bearer client',
      'API-Key': 'client',
      Cookie: 'a=b',
      'X-Tollgate-Owner': 'someone',
      'Transfer-Encoding': 'chunked',
      'Accept-Encoding': 'gzip',
      'X-Forwarded-Host': 'evil',
      'User-Agent': 'sdk/1',
    },
  })
  req.on('error', () => undefined)
  rewriteOutgoingHeaders(req, { 'content-type': 'application/json', 'api-key': 'gateway' })
  t.same(req.getHeaderNames().sort(), ['api-key', 'content-type', 'host', 'user-agent'])
  t.equal(req.getHeader('api-key'), 'gateway')
  req.destroy()
})
