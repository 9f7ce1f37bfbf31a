import { openSync, readSync, closeSync } from 'node:fs';
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

const x64 = { arch: 'x64', foreignHandlers: false };

describe('foreignBuild', () => {
  it('takes the running node binary for a build of this machine', () => {
    const head = Buffer.alloc(256);
    const fd = openSync(process.execPath, 'r');
    const length = readSync(fd, head, 0, 256, 0);
    closeSync(fd);
    expect(foreignBuild(head.subarray(0, length), { arch: process.arch, foreignHandlers: false })).toBeNull();
  });

  it('names an aarch64 ELF on x86-64, and a big-endian s390x one, by their machines', () => {
    expect(foreignBuild(elf(183), x64)).toBe("an ELF program for another machine (aarch64), not this one's (x86-64)");
    expect(foreignBuild(elf(22, true), x64)).toBe("an ELF program for another machine (s390x), not this one's (x86-64)");
  });

  it('takes a 32-bit x86 ELF on x86-64, and ARM on aarch64, as the kernel runs them', () => {
    expect(foreignBuild(elf(3), x64)).toBeNull();
    expect(foreignBuild(elf(40), { arch: 'arm64', foreignHandlers: false })).toBeNull();
  });

  it('names a Mach-O and a Windows build, and judges nothing when binfmt_misc handlers may run them or the architecture is unknown', () => {
    const macho = Buffer.from([0xcf, 0xfa, 0xed, 0xfe, 0x07, 0x00, 0x00, 0x01]);
    expect(foreignBuild(macho, x64)).toBe('a macOS program (Mach-O)');
    expect(foreignBuild(Buffer.from('MZ\x90\x00', 'latin1'), x64)).toBe('a Windows program (.exe)');
    expect(foreignBuild(macho, { arch: 'x64', foreignHandlers: true })).toBeNull();
    expect(foreignBuild(elf(183), { arch: 'sparc64', foreignHandlers: false })).toBeNull();
  });

  it('leaves a script, a text without #!, and a file too short to tell alone', () => {
    for (const text of ['#!/bin/sh\necho hi\n', 'echo hi\n', 'M', '\x7fEL', '']) expect(foreignBuild(Buffer.from(text, 'latin1'), x64), JSON.stringify(text)).toBeNull();
  });
});

describe('failedDownload', () => {
  it('names an empty file and a web page, with or without a byte order mark or leading blank lines', () => {
    expect(failedDownload(Buffer.alloc(0))).toBe('empty, no program');
    for (const page of ['<!DOCTYPE html>\n<html>', '\ufeff\n  <html lang="en">', '<!doctype HTML><title>Sign in</title>']) expect(failedDownload(Buffer.from(page)), JSON.stringify(page)).toBe('a web page (HTML), no program');
  });

  it('leaves a script, a program and a text that only mentions HTML alone', () => {
    for (const text of ['#!/bin/sh\necho "<html>"\n', '\x7fELF', 'echo <html>\n', ' ']) expect(failedDownload(Buffer.from(text, 'latin1')), JSON.stringify(text)).toBeNull();
  });
});
