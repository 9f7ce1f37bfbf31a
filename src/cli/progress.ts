import cliProgress from 'cli-progress';

/**
 * Progress of a long run on stderr: a bar redrawn in place on a terminal that can take it, a line
 * of plain text at each tenth of the way under `TERM=dumb` or in CI (whose logs keep every byte),
 * nothing when stderr goes elsewhere or JSON was asked for. Both show the rate and the time left.
 *
 * The bar hides the cursor and turns line wrap off while it draws. A run stopped by Ctrl-C or a
 * kill must not leave the terminal so: on SIGINT and SIGTERM the bar puts both back, then the
 * signal is raised again with the default action, so the run ends as the signal asked (exit 130 or
 * 143 in a shell), not later.
 */

export type ProgressMode = 'bar' | 'plain' | 'none';

/** Runs shorter than this end in a moment: no progress is shown. */
const MIN_TOTAL = 200;
/** Plain text prints one line at each tenth of the way. */
const PLAIN_STEPS = 10;
/** The rate is not shown before this much has run: the first commits say little about the rest. */
const SETTLE_MS = 500;
const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

function isCi(env: NodeJS.ProcessEnv): boolean {
  const value = env['CI'];
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
}

/** How progress is shown on `stream` in this environment. */
export function progressMode(stream: { readonly isTTY?: boolean }, env: NodeJS.ProcessEnv, json: boolean): ProgressMode {
  if (json) return 'none';
  if (isCi(env)) return 'plain';
  if (stream.isTTY !== true) return 'none';
  return env['TERM'] === 'dumb' ? 'plain' : 'bar';
}

/** `45s`, `3m05s`, `2h07m`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** The rate so far and the time left at that rate, as shown; `--` until there is enough to judge by. Pure. */
export function pace(done: number, total: number, elapsedMs: number): { readonly rate: string; readonly eta: string } {
  if (done <= 0 || elapsedMs < SETTLE_MS) return { rate: '--', eta: '--' };
  const perSecond = (done * 1000) / elapsedMs;
  return { rate: perSecond >= 10 ? perSecond.toFixed(0) : perSecond.toFixed(1), eta: formatDuration((total - done) / perSecond) };
}

export interface ProgressOptions {
  /** What is running (`verifying`) and what it counts (`commits`). */
  readonly label: string;
  readonly unit: string;
  readonly mode: ProgressMode;
  readonly stream?: NodeJS.WriteStream;
  /** Milliseconds, for the rate; Date.now by default. */
  readonly clock?: () => number;
}

export class Progress {
  private readonly stream: NodeJS.WriteStream;
  private readonly clock: () => number;
  private bar: cliProgress.SingleBar | null = null;
  private started: number | null = null;
  private step = 0;
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    this.stop();
    // Our listeners are gone, so the signal now takes its default action: the run ends as asked.
    process.kill(process.pid, signal);
  };
  private readonly onExit = (): void => this.stop();

  constructor(private readonly options: ProgressOptions) {
    this.stream = options.stream ?? process.stderr;
    this.clock = options.clock ?? Date.now;
  }

  /** Call with each new count; the first call of a long enough run starts the display. */
  readonly update = (done: number, total: number): void => {
    const mode = this.options.mode;
    if (mode === 'none' || total < MIN_TOTAL) return;
    if (this.started === null) this.start(total);
    const shown = pace(done, total, this.clock() - this.started!);
    if (mode === 'bar') {
      this.bar?.update(done, { rate: shown.rate, remaining: shown.eta });
      return;
    }
    const step = Math.floor((done * PLAIN_STEPS) / total);
    if (step <= this.step) return;
    this.step = step;
    this.stream.write(`${this.options.label}: ${done}/${total} ${this.options.unit} (${Math.floor((done * 100) / total)}%), ${shown.rate} ${this.options.unit}/s, ETA ${shown.eta}\n`);
  };

  private start(total: number): void {
    this.started = this.clock();
    if (this.options.mode !== 'bar') return;
    this.bar = new cliProgress.SingleBar(
      {
        // Our own rate and time left: cli-progress's {eta} averages only its last ten updates.
        format: `${this.options.label} [{bar}] {value}/{total} ${this.options.unit}, {rate} ${this.options.unit}/s, ETA {remaining}`,
        hideCursor: true,
        linewrap: false,
        clearOnComplete: true,
        gracefulExit: false,
        stream: this.stream,
      },
      cliProgress.Presets.shades_classic,
    );
    for (const signal of SIGNALS) process.on(signal, this.onSignal);
    process.on('exit', this.onExit);
    this.bar.start(total, 0, { rate: '--', remaining: '--' });
  }

  /** Takes the bar down and gives the terminal back its cursor and line wrap. Safe to call twice. */
  stop(): void {
    const bar = this.bar;
    if (bar === null) return;
    this.bar = null;
    for (const signal of SIGNALS) process.removeListener(signal, this.onSignal);
    process.removeListener('exit', this.onExit);
    bar.stop();
  }

  /** Runs `work` and stops the display when it ends, however it ends. */
  async until<T>(work: Promise<T>): Promise<T> {
    try {
      return await work;
    } finally {
      this.stop();
    }
  }
}

/** The progress of `label` on stderr, shown as this terminal and environment allow. */
export function createProgress(label: string, unit: string, json: boolean): Progress {
  return new Progress({ label, unit, mode: progressMode(process.stderr, process.env, json) });
}
