import { openSync, readSync, closeSync } from 'node:fs';
import { machine } from 'node:os';
import { describe, expect, it } from 'vitest';
import { failedDownload, foreignBuild } from '../../../src/util/program-format.js';

function elf(machine: number, bigEndian = false): Buffer {
  const head = Buffer.alloc(64);
  head.writeUInt32BE(0x7f454c46, 0);
  head[4] = 2;
  head[5] = bigEndian ? 2 : 1;
  if (bigEndian) head.writeUInt16BE(machine, 18);
  else head.writeUInt16LE(machine, 18);
  return head;
}

const x64 = { platform: 'linux', machine: 'x86_64', foreignHandlers: false };

/** A Windows program's first bytes: `MZ`, and at the offset at 0x3c its PE header. */
function pe(): Buffer {
  const head = Buffer.alloc(128);
  head.write('MZ', 0, 'latin1');
  head.writeUInt32LE(64, 0x3c);
  head.write('PE\0\0', 64, 'latin1');
  return head;
}

describe('foreignBuild', () => {
  it('takes the running node binary for a build of this machine', () => {
    const head = Buffer.alloc(256);
    const fd = openSync(process.execPath, 'r');
    const length = readSync(fd, head, 0, 256, 0);
    closeSync(fd);
    expect(foreignBuild(head.subarray(0, length), { platform: process.platform, machine: machine(), foreignHandlers: false })).toBeNull();
  });

  it('names an aarch64 ELF on x86-64, and a big-endian s390x one, by their machines', () => {
    expect(foreignBuild(elf(183), x64)).toBe("an ELF program for another machine (aarch64), not this one's (x86-64)");
    expect(foreignBuild(elf(22, true), x64)).toBe("an ELF program for another machine (s390x), not this one's (x86-64)");
  });

  it('takes a 32-bit x86 ELF on x86-64, and ARM on aarch64, as the kernel runs them', () => {
    expect(foreignBuild(elf(3), x64)).toBeNull();
    expect(foreignBuild(elf(40), { platform: 'linux', machine: 'aarch64', foreignHandlers: false })).toBeNull();
  });

  it("judges by the kernel's machine, and a 32-bit personality on a 64-bit kernel (i686, armv8l) still runs 64-bit programs", () => {
    expect(foreignBuild(elf(62), { platform: 'linux', machine: 'i686', foreignHandlers: false })).toBeNull();
    expect(foreignBuild(elf(183), { platform: 'linux', machine: 'armv8l', foreignHandlers: false })).toBeNull();
    expect(foreignBuild(elf(183), { platform: 'linux', machine: 'armv7l', foreignHandlers: false })).toBe("an ELF program for another machine (aarch64), not this one's (ARM)");
  });

  it('names a Mach-O and a Windows build, and judges nothing when binfmt_misc handlers may run them or the architecture is unknown', () => {
    const macho = Buffer.from([0xcf, 0xfa, 0xed, 0xfe, 0x07, 0x00, 0x00, 0x01]);
    expect(foreignBuild(macho, x64)).toBe('a macOS program (Mach-O)');
    expect(foreignBuild(pe(), x64)).toBe('a Windows program (.exe)');
    // Its PE header past the bytes read (MSVC puts it at 0x100 and later): still a Windows program.
    const far = Buffer.alloc(256);
    far.write('MZ', 0, 'latin1');
    far.writeUInt32LE(0x108, 0x3c);
    expect(foreignBuild(far, x64)).toBe('a Windows program (.exe)');
    expect(foreignBuild(macho, { ...x64, foreignHandlers: true })).toBeNull();
    expect(foreignBuild(elf(183), { ...x64, machine: 'sparc64' })).toBeNull();
  });

  it("judges nothing on another system than Linux, where a Mach-O or a PE is the system's own (node itself on macOS)", () => {
    const macho = Buffer.from([0xcf, 0xfa, 0xed, 0xfe, 0x07, 0x00, 0x00, 0x01]);
    expect(foreignBuild(macho, { ...x64, platform: 'darwin' })).toBeNull();
    expect(foreignBuild(pe(), { ...x64, platform: 'win32' })).toBeNull();
    expect(foreignBuild(elf(183), { ...x64, platform: 'darwin' })).toBeNull();
  });

  it('leaves a script, a text without #!, and a file too short to tell alone', () => {
    for (const text of ['#!/bin/sh\necho hi\n', 'echo hi\n', 'M', '\x7fEL', '', `MZ_HOME=/tmp; echo ok $MZ_HOME\n${' '.repeat(80)}`]) expect(foreignBuild(Buffer.from(text, 'latin1'), x64), JSON.stringify(text)).toBeNull();
  });
});

describe('failedDownload', () => {
  it('names an empty file and a web page, with or without a byte order mark or leading blank lines', () => {
    expect(failedDownload(Buffer.alloc(0))).toBe('empty, no program');
    for (const page of ['<!DOCTYPE html>\n<html>', '\ufeff\n  <html lang="en">', '<!doctype HTML><title>Sign in</title>']) expect(failedDownload(Buffer.from(page)), JSON.stringify(page)).toBe('a web page (HTML), no program');
  });

  it('leaves a script, a program and a text that only mentions HTML alone', () => {
    for (const text of ['#!/bin/sh\necho "<html>"\n', '\x7fELF', 'echo <html>\n', ' ', '<html_in.txt cat\n']) expect(failedDownload(Buffer.from(text, 'latin1')), JSON.stringify(text)).toBeNull();
  });
});
