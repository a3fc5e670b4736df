// A nightly job on one host only: hold the lock while the job runs, stop if it is lost, and
// refuse a late write from a paused run with the fence.
//   node --experimental-strip-types examples/nightly.ts redis://127.0.0.1:6379   (Node 22.6+)
import { Client, FencedError, FencelockError, Writes } from 'fencelock'

async function nightly (url: string): Promise<void> {
  const client = new Client(url)
  try {
    await client.using('reports/nightly', { ttl: 30_000, wait: 0 }, async (signal, guard) => {
      // `signal` aborts if the lock is lost: pass it to what you call.
      const report = await build(signal)
      // Written only if no newer holder has written since (a paused run cannot overwrite).
      await client.fencedStore('reports/latest').apply(guard.fence, new Writes().set('reports:latest', report))
    })
  } catch (error) {
    if (error instanceof FencelockError && error.code === 'busy') {
      console.log(`another host runs it (${String(error.remaining)} ms left on its lease)`)
      return
    }
    if (error instanceof FencedError) {
      // A newer run wrote first: this one's fence is older than the one the resource accepted.
      const behind: bigint = error.accepted - error.fence
      console.log(`a newer run wrote reports/latest (fence ${error.accepted}, ${behind} past ours)`)
      return
    }
    throw error
  }
}

async function build (signal: AbortSignal): Promise<string> {
  signal.throwIfAborted()
  return `report of ${new Date().toISOString()}`
}

nightly(process.argv[2] ?? 'redis://127.0.0.1:6379').catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
