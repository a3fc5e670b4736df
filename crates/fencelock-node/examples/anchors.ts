// What node-redlock users reach for, with their types: closing a client, a logger, the error
// classes, a hold's signal (aborted by a loss only).
import {
  BusyError, Client, ClientClosedError, FencelockError, InvalidArgumentError, Logger, NotHeldError, TimedOutError
} from 'fencelock'

export async function anchors (url: string): Promise<void> {
  const logger: Logger = { warn: (line: string) => console.warn(line), info: console.info }
  await using client = new Client(url, { logger })
  const guard = await client.lock('jobs/cleanup', { ttl: 10_000 }).acquire()
  guard.signal.addEventListener('abort', () => {
    const reason = guard.signal.reason as NotHeldError
    console.error('lost, never released:', reason.reason, reason.lock)
  })
  try {
    await client.lock('jobs/cleanup', { wait: 0 }).acquire()
  } catch (error) {
    if (error instanceof BusyError) console.log('busy for', error.remaining, 'ms')
    else if (error instanceof TimedOutError || error instanceof InvalidArgumentError) console.log(error.code)
    else if (!(error instanceof FencelockError)) throw error
  }
  await guard.release()
  await client.close()
  const closed: boolean = client.closed
  await client.inspect('jobs/cleanup').catch((error: unknown) => {
    if (error instanceof ClientClosedError) console.log(closed, error.reason)
  })
}
