// Deployment capacity in this process (the embedded gateway), held to the shared contract.
import t from 'tap'
import { memoryCapacityStore } from '../../src/capacity/memory.ts'
import { capacityContract } from './contract.ts'

capacityContract(t, 'memory', async (rules) => {
  const store = memoryCapacityStore(rules)
  return [store, store, store] as const
})
