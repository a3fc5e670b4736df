// The lock family, election, recipes and operator calls, with their types.
import {
  Client, FencelockError, Guard, Leader, LockInfo, MultiGuard, Observation, OnceGaveUp, OnceResult, OnceTooLate,
  Writes,
  codes, protocolVersion, shutdown, version
} from 'fencelock'

export async function tour (url: string): Promise<void> {
  const client = new Client(url, { commandTimeout: 2_000 })
  const redlock = Client.redlock([url, url.replace('6379', '6380'), url.replace('6379', '6381')])
  console.log(client.server, redlock.server, version, protocolVersion, codes.error.length)

  // One holder at a time, with a fence; abort a wait with a signal.
  const guard: Guard = await client.lock('accounts/42', { ttl: 10_000 }).acquire({ signal: AbortSignal.timeout(5_000) })
  const fence: bigint = guard.fence
  guard.signal.addEventListener('abort', () => console.log('lost:', guard.lostReason))
  guard.releaseRequested.addEventListener('abort', () => { void guard.release() })
  await guard.extend(20_000)
  console.log(guard.remaining(), guard.isHeld(), fence)
  const released: boolean = await guard.release()

  // The family.
  {
    await using fair = await client.fairLock('queue', { queueTimeout: 5_000 }).acquire()
    await using licence = await client.semaphore('licences', 10, { take: 2 }).acquire()
    await using reader = await client.readWriteLock('config').read().acquire()
    const reentrant = client.reentrantLock('tree', { maxReentry: 8 })
    await using outer = await reentrant.acquire()
    await using inner = await reentrant.acquire()
    console.log(fair.fence, licence.fence, reader.fence, outer.fence === inner.fence, released)
  }
  const maybe: Guard | null = await client.lock('once-a-day').tryAcquire()
  await maybe?.release()

  // Several at once, run once, fenced writes.
  const all: MultiGuard = await client.multiLock(['a', 'b', 'c'], { ttl: 10_000, label: 'batch-7' }).acquire()
  for (const [name, f] of all.fences) console.log(name, f)
  await all.release()
  const migrated: OnceResult<number> = await client.once('migrations/0042').run(async (f) => Number(f % 10n))
  if (migrated.ran) console.log('ran, gave', migrated.value)
  else console.log('already done at', migrated.at.toISOString())
  // The work's `signal` aborts if the run's lock is lost while it runs.
  const copied: OnceResult<string> = await client.once('copies/7').run(async (f, _tick, signal: AbortSignal) => {
    signal.throwIfAborted()
    return `copied with fence ${f}`
  })
  if (copied.ran) console.log(copied.value)
  // Once per tick of a scheduled job: the day by the Redis server's clock, or the scheduler's time.
  const daily = await client.once('reports/nightly', { tick: { every: 86_400_000, late: 6 * 3_600_000 }, keep: 14 * 86_400_000, label: 'host-a' })
    .run(async (f, tick) => `report of ${tick?.toISOString() ?? 'no tick'} with fence ${f}`)
  if (daily.ran) console.log(daily.value, daily.tick)
  else if (daily.tooLate) console.log(`${daily.late} ms after ${daily.tick.toISOString()}: not run`)
  else if (daily.gaveUp) console.log(`${daily.failures} runs failed for ${daily.tick?.toISOString()}: not run`)
  else console.log('done before for', daily.tick?.toISOString(), 'at', daily.at.toISOString())
  const beat: OnceResult<void, OnceTooLate | OnceGaveUp> = await client.once('beat', { tick: { planned: new Date('2026-11-29T00:00:00Z') } }).run(() => {})
  console.log(beat.tick)
  // Without a tick, a start gives up only with `attempts`.
  const imported: OnceResult<number, OnceGaveUp> = await client.once('imports/7', { attempts: 5 }).run(() => 7)
  if (!imported.ran && imported.gaveUp) console.log(imported.failures, imported.tick)
  // @ts-expect-error: attempts is a number
  client.once('imports/7', { attempts: '5' })
  // @ts-expect-error: a tick is every so often or planned, not both
  client.once('beat', { tick: { every: 60_000, planned: 0 } })
  // @ts-expect-error: a label is a string
  client.multiLock(['a', 'b'], { label: 7 })
  const accepted: bigint = await client.fencedStore('ledger').apply(fence, new Writes().incrBy('ledger:total', 5).hset('ledger:last', 'by', 'me'))
  console.log(accepted, await client.fencedStore('ledger').accepted())

  // Election.
  const election = client.election('scheduler')
  const leadership = await election.campaign('10.0.0.7:8080', { ttl: 15_000, label: 'host-7:4711' })
  await leadership.proclaim('10.0.0.7:8081')
  const now: Leader | null = await election.leader()
  console.log(now?.value, now?.term, leadership.term, leadership.since.getTime())
  const stop = new AbortController()
  for await (const seen of election.observe({ signal: stop.signal })) {
    const o: Observation = seen
    if (o.code === 'leader') console.log(o.value, o.term)
    stop.abort()
  }
  await leadership.resign()

  // Operators.
  const info: LockInfo = await client.inspect('accounts/42')
  console.log(info.holder?.fence, info.waiting, info.waiters.map((w) => w.place))
  const { locks, skipped } = await client.list('accounts/*')
  console.log(locks.length, skipped.map((e: FencelockError) => e.code))
  console.log(await client.requestRelease('accounts/42'), await client.forceRelease('accounts/42'))
  for await (const name of client.releases('accounts/42', { signal: AbortSignal.timeout(100) })) console.log(name)

  try {
    await client.lock('x', { wait: 0 }).acquire()
  } catch (error) {
    if (error instanceof FencelockError) console.log(error.code, error.lock)
  }
  shutdown()
}
