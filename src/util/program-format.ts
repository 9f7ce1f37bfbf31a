/**
 * Whether a program's first bytes are a build for another machine: a macOS or Windows build, or an
 * ELF binary of another architecture (a release downloaded for the wrong platform, a binary copied
 * from a laptop). The kernel refuses it (ENOEXEC), and the shell that spawning falls back to then
 * reads it as a script and ends 127 or 126: every attempt was claimed and ended as the work's
 * failure. Pure: what the kernel could still run is passed in.
 */

/**
 * ELF e_machine numbers a kernel of each machine (`uname -m`, os.machine(): the kernel's, not node's
 * build, which may be a 32-bit one on a 64-bit kernel) runs natively or through its compat layer.
 */
const NATIVE_MACHINES: Readonly<Record<string, readonly number[]>> = {
  x86_64: [62, 3],
  // A 32-bit personality (linux32, setarch) on a 64-bit kernel says i686 or armv8l: the kernel still runs 64-bit programs.
  i386: [3, 62],
  i686: [3, 62],
  aarch64: [183, 40],
  armv6l: [40],
  armv7l: [40],
  armv8l: [40, 183],
  riscv64: [243],
  ppc64le: [21],
  ppc64: [21, 20],
  ppc: [20],
  s390x: [22],
  loongarch64: [258],
  mips: [8],
  mips64: [8],
};

/** The names of common e_machine numbers, for the message. */
const MACHINE_NAMES: Readonly<Record<number, string>> = {
  3: 'x86', 8: 'MIPS', 20: 'PowerPC', 21: 'PowerPC 64', 22: 's390x', 40: 'ARM', 62: 'x86-64', 183: 'aarch64', 243: 'RISC-V', 258: 'LoongArch',
};

const machineName = (machine: number): string => MACHINE_NAMES[machine] ?? `machine ${machine}`;

export interface ProgramHost {
  /** process.platform: only Linux is judged, whose kernel's formats these are (a Mach-O is macOS's own, a PE Windows'). */
  readonly platform: string;
  /** The kernel's machine (os.machine()), not node's build. */
  readonly machine: string;
  /**
   * Whether the kernel has binfmt_misc handlers registered (qemu-user, Wine, WSL's interop): then a
   * foreign build may run after all, and nothing is judged.
   */
  readonly foreignHandlers: boolean;
}

/** What the program whose first bytes are `head` is built for, when that is another machine than `host`; null otherwise or when it cannot be told. */
export function foreignBuild(head: Buffer, host: ProgramHost): string | null {
  if (host.foreignHandlers || host.platform !== 'linux') return null;
  if (head.length >= 20 && head.readUInt32BE(0) === 0x7f454c46) {
    const native = NATIVE_MACHINES[host.machine];
    if (native === undefined) return null;
    // EI_DATA (byte 5) says the byte order of every field after e_ident: 1 little-endian, 2 big-endian.
    const machine = head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
    if (native.includes(machine)) return null;
    return `an ELF program for another machine (${machineName(machine)}), not this one's (${machineName(native[0]!)})`;
  }
  if (head.length >= 4 && [0xfeedface, 0xcefaedfe, 0xfeedfacf, 0xcffaedfe].includes(head.readUInt32BE(0))) return 'a macOS program (Mach-O)';
  // `MZ` alone begins text too (a script setting MZ_HOME): a Windows program names its PE header (`PE\0\0`) at the offset at
  // 0x3c, often past the bytes read (0x100 and later from MSVC); an offset below 64 KiB holds two NUL bytes, which no script has.
  if (head.length >= 64 && head[0] === 0x4d && head[1] === 0x5a) {
    const pe = head.readUInt32LE(0x3c);
    if (pe + 4 <= head.length ? head.readUInt32BE(pe) === 0x50450000 : pe >= 0x40 && pe < 0x10000) return 'a Windows program (.exe)';
  }
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
  // `<html` followed by a name's character is a shell redirection (`<html_in.txt cat`), not a page.
  if (/^<(!doctype\s+html|html)[\s>]/.test(start)) return 'a web page (HTML), no program';
  return null;
}
