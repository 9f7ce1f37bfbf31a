/**
 * What one dispatch attempt has spent while it runs, as the runner sees it live: its executor's
 * cost from the usage its stream reports, and what each consult its agent asks holds (its whole
 * budget while it runs, its receipt's cost once answered). Both come out of one budget, and the
 * ledger learns the executor's part only from the attempt's receipt: without this, the executor
 * could spend the whole budget while its consults spent it again.
 */
export class AttemptSpend {
  private executorUsd = 0;
  private readonly consults = new Map<string, number>();

  constructor(private readonly limitUsd: number) {}

  /** The executor's cost so far, as its stream reports it. */
  reportExecutor(usd: number): void {
    this.executorUsd = Math.max(this.executorUsd, usd);
  }

  /** What a consult holds now: its budget while it runs, then what its receipt says it cost. */
  holdConsult(messageId: string, usd: number): void {
    this.consults.set(messageId, usd);
  }

  private consultsUsd(): number {
    let sum = 0;
    for (const usd of this.consults.values()) sum += usd;
    return sum;
  }

  /** What the executor may cost before it is stopped: the budget less what its consults hold. */
  executorCeilingUsd(): number {
    return Math.max(0, this.limitUsd - this.consultsUsd());
  }

  /** What the executor has cost so far: a new consult's budget comes out of what it left. */
  executorSpentUsd(): number {
    return this.executorUsd;
  }
}
