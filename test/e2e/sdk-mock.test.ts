// The official openai SDK, pointed at a running Tollgate on its default configuration
// (the built-in mock backend), calls every /v2 endpoint.
import t from 'tap'
import { sdkClient, startKeyedGateway } from '../helpers/sdk-gateway.ts'
import { endpointTests } from './endpoints.ts'

const { gw, key } = await startKeyedGateway(t, { name: 'sdk' })
const client = sdkClient(gw, key)

endpointTests(t, () => ({ gw, client, key }))
