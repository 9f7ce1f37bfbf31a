/**
 * Whether a program's first bytes are a build for another machine: a macOS or Windows build, or an
 * ELF binary of another architecture (a release downloaded for the wrong platform, a binary copied
 * from a laptop). The kernel refuses it (ENOEXEC), and the shell that spawning falls back to then
 * reads it as a script and ends 127 or 126: every attempt was claimed and ended as the work's
 * failure. Pure: what the kernel could still run is passed in.
 */

/** ELF e_machine numbers a kernel of each Node architecture runs natively or through its compat layer. */
const NATIVE_MACHINES: Readonly<Record<string, readonly number[]>> = {
  x64: [62, 3],
  ia32: [3],
  arm64: [183, 40],
  arm: [40],
  riscv64: [243],
  ppc64: [21],
  ppc: [20],
  s390x: [22],
  loong64: [258],
  mips: [8],
  mipsel: [8],
};

/** The names of common e_machine numbers, for the message. */
const MACHINE_NAMES: Readonly<Record<number, string>> = {
  3: 'x86', 8: 'MIPS', 20: 'PowerPC', 21: 'PowerPC 64', 22: 's390x', 40: 'ARM', 62: 'x86-64', 183: 'aarch64', 243: 'RISC-V', 258: 'LoongArch',
};

const machineName = (machine: number): string => MACHINE_NAMES[machine] ?? `machine ${machine}`;

export interface ProgramHost {
  /** process.arch of the machine that would run it. */
  readonly arch: string;
  /**
   * Whether the kernel has binfmt_misc handlers registered (qemu-user, Wine, WSL's interop): then a
   * foreign build may run after all, and nothing is judged.
   */
  readonly foreignHandlers: boolean;
}

/** What the program whose first bytes are `head` is built for, when that is another machine than `host`; null otherwise or when it cannot be told. */
export function foreignBuild(head: Buffer, host: ProgramHost): string | null {
  if (host.foreignHandlers) return null;
  if (head.length >= 20 && head.readUInt32BE(0) === 0x7f454c46) {
    const native = NATIVE_MACHINES[host.arch];
    if (native === undefined) return null;
    // EI_DATA (byte 5) says the byte order of every field after e_ident: 1 little-endian, 2 big-endian.
    const machine = head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
    if (native.includes(machine)) return null;
    return `an ELF program for another machine (${machineName(machine)}), not this one's (${machineName(native[0]!)})`;
  }
  if (head.length >= 4 && [0xfeedface, 0xcefaedfe, 0xfeedfacf, 0xcffaedfe].includes(head.readUInt32BE(0))) return 'a macOS program (Mach-O)';
  if (head.length >= 2 && head[0] === 0x4d && head[1] === 0x5a) return 'a Windows program (.exe)';
  return null;
}

/**
 * Whether a program's first bytes are what a download that failed leaves: nothing, or the web page a
 * server sent in its place (a 404, a sign-in page). The shell that spawning falls back to runs an
 * empty file as nothing (status 0, no work) and a page as a script that fails: each attempt was
 * claimed and ended as the work's failure. `head` holds the file's first bytes, all of it when short.
 */
export function failedDownload(head: Buffer): string | null {
  if (head.length === 0) return 'empty, no program';
  const start = head.subarray(0, 64).toString('latin1').replace(/^\xef\xbb\xbf/, '').trimStart().toLowerCase();
  if (start.startsWith('<!doctype html') || start.startsWith('<html')) return 'a web page (HTML), no program';
  return null;
}
