import { walkRegularFiles, type WalkEntry, type WalkOptions } from '../../core/safe-path.js'

export interface BudgetedWalk {
  /** The budget ran out before the walk finished (what was visited so far is all the caller gets). */
  outOfTime: boolean
  /**
   * Settles once the walker has really stopped. A walk cut by the budget finishes its current step first
   * (a generator cannot be interrupted between yields), so a caller that bounds concurrent walks keeps
   * its slot until then.
   */
  settled: Promise<void>
}

type Step = IteratorResult<WalkEntry, undefined> | 'out of time'

/**
 * walkRegularFiles with a wall-clock budget: `visit` sees each file until it returns false, the walk ends
 * or `budgetMs` passes, whichever comes first. A throw from `visit` or the walker ends the walk and
 * propagates. The budget also fires while the walker is between yields (a tree of many empty dirs).
 */
export async function walkWithin (root: string, opts: WalkOptions, budgetMs: number, visit: (entry: WalkEntry) => boolean): Promise<BudgetedWalk> {
  const walk = walkRegularFiles(root, opts)
  let outOfTime = false
  let wake: ((step: Step) => void) | undefined
  const timer = setTimeout(() => { outOfTime = true; wake?.('out of time') }, budgetMs).unref()
  try {
    for (;;) {
      const pending = walk.next()
      // A fresh promise per step (not Promise.race on one long-lived timer promise, which keeps a reaction per step).
      const step = await new Promise<Step>((resolve, reject) => {
        wake = resolve
        if (outOfTime) resolve('out of time')
        pending.then(resolve, reject)
      })
      if (step === 'out of time') {
        return { outOfTime, settled: pending.then(async () => { await walk.return(undefined) }).then(() => {}, () => {}) }
      }
      if (step.done === true || !visit(step.value)) break
    }
  } catch (err) {
    await walk.return(undefined).catch(() => {})
    throw err
  } finally {
    clearTimeout(timer)
    wake = undefined
  }
  await walk.return(undefined)
  return { outOfTime: false, settled: Promise.resolve() }
}
