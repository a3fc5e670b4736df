// A BullMQ worker, started on several hosts: each repetition of the repeatable job `rollup`
// runs once across them (BullMQ delivers at least once), and at most 2 `export` jobs run at
// once across all of them.
//   node --experimental-strip-types examples/bullmq.ts redis://127.0.0.1:6379   (Node 22.6+)
import { Job, Queue, Worker } from 'bullmq'
import { Client, Writes } from 'fencelock'
import { limitConcurrency, oncePerRepetition, plannedTime, RepetitionContext } from 'fencelock/bullmq'

interface Rollup { table: string }

export async function start (url: string): Promise<() => Promise<void>> {
  const { hostname, port } = new URL(url)
  const connection = { host: hostname, port: Number(port || 6379), maxRetriesPerRequest: null }
  const client = new Client(url)

  // Any number of producers may upsert it, under any scheduler id: each repetition runs once.
  const jobs = new Queue<Rollup>('jobs', { connection })
  await jobs.upsertJobScheduler('rollup-every-5-min', { pattern: '*/5 * * * *' }, { name: 'rollup', data: { table: 'events' } })

  const rollup = oncePerRepetition(client, async (job: Job<Rollup>, { fence, tick }: RepetitionContext) => {
    // Written only if no newer run of this repetition wrote since (a paused run cannot).
    await client.fencedStore('rollups').apply(fence, new Writes().set(`rollup:{rollups}:${job.data.table}`, String(tick?.getTime())))
    return { table: job.data.table, tick: tick?.toISOString() }
  }, { keep: 24 * 3_600_000 })
  const worker = new Worker<Rollup>('jobs', rollup, { connection, concurrency: 4 })

  // At most 2 exports at once across every worker; `signal` aborts if the permit is lost.
  const exporter = new Worker<{ file: string }, number>('exports', limitConcurrency(client, async (job, { signal, guard }) => {
    signal.throwIfAborted()
    console.log(`export ${job.data.file} under permit fence ${guard.fence}`)
    return job.data.file.length
  }, { name: 'exports', permits: 2 }), { connection, concurrency: 8 })

  // Both: a repetition that runs once, holding a permit of `reports` while it does.
  const reports = new Worker('reports', limitConcurrency(client, oncePerRepetition(client, async (job, { tick }) => {
    console.log(job.name, plannedTime(job)?.getTime() === tick?.getTime())
  }), { name: 'reports', permits: 1 }), { connection })

  return async () => {
    await Promise.all([worker.close(), exporter.close(), reports.close(), jobs.close()])
    await client.close()
  }
}

if (require.main === module) {
  start(process.argv[2] ?? 'redis://127.0.0.1:6379').catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
