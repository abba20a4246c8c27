// The job runner contract on the in-process runner (the embedded store's).
import t from 'tap'
import { createLocalRunner } from '../../src/queue/local-runner.ts'
import { runnerContract } from './runner-contract.ts'

runnerContract(t, 'local', async () => ({ open: async () => createLocalRunner(), cleanup: async () => {} }))
