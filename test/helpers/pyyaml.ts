import { spawnSync } from 'node:child_process';

/** Debian's python3 with python3-yaml (PyYAML, a YAML 1.1 reader); the pyenv python on PATH may lack it. */
export const PYTHON = '/usr/bin/python3';

/**
 * Reads each text with PyYAML's `safe_load` and prints JSON. A datetime or date becomes
 * `{"$timestamp": "..."}` (the ISO form, UTC with `Z`, the fraction without trailing zeros), so a
 * test can tell "PyYAML saw a timestamp" from "PyYAML saw the string"; any other type JSON cannot
 * hold becomes `{"$type": name}`; a load that fails gives `{"error": message}`.
 */
const SCRIPT = String.raw`
import datetime, json, sys, yaml

def plain(value):
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        text = value.strftime('%Y-%m-%dT%H:%M:%S')
        if value.microsecond:
            text += ('.%06d' % value.microsecond).rstrip('0')
        return {'$timestamp': text + 'Z'}
    if isinstance(value, datetime.date):
        return {'$timestamp': value.isoformat()}
    if isinstance(value, dict):
        return {k if isinstance(k, str) else json.dumps({'$key': repr(k)}): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return {'$type': type(value).__name__}

out = []
for text in json.load(sys.stdin):
    try:
        out.append({'value': plain(yaml.safe_load(text))})
    except Exception as error:
        out.append({'error': str(error).splitlines()[0]})
json.dump(out, sys.stdout)
`;

export type PyYamlResult = { readonly value: unknown } | { readonly error: string };

/** Loads every text with PyYAML in one python process. */
export function loadWithPyYaml(texts: readonly string[]): PyYamlResult[] {
  const result = spawnSync(PYTHON, ['-c', SCRIPT], { input: JSON.stringify(texts), encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`PyYAML failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as PyYamlResult[];
}

/** The PyYAML version, which also proves it is installed. */
export function pyYamlVersion(): string {
  const result = spawnSync(PYTHON, ['-c', 'import yaml; print(yaml.__version__)'], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${PYTHON} has no PyYAML (Debian: apt-get install python3-yaml): ${result.stderr}`);
  return result.stdout.trim();
}

/**
 * Replaces, in coo's value, each string that PyYAML read as a timestamp with PyYAML's marker when
 * both name the same instant: the comparison "timestamps compared as strings" for entries written
 * before the writer quoted them. Anything else is left as it is, so it must then be equal.
 */
export function alignTimestamps(coo: unknown, py: unknown): unknown {
  if (typeof coo === 'string' && py !== null && typeof py === 'object' && '$timestamp' in py) {
    const stamp = (py as { $timestamp: string }).$timestamp;
    const millis = (text: string): number => Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text);
    return !Number.isNaN(millis(coo)) && millis(coo) === millis(stamp) ? py : coo;
  }
  if (Array.isArray(coo) && Array.isArray(py)) return coo.map((item, index) => alignTimestamps(item, py[index]));
  if (coo !== null && typeof coo === 'object' && py !== null && typeof py === 'object' && !Array.isArray(coo)) {
    return Object.fromEntries(Object.entries(coo).map(([key, item]) => [key, alignTimestamps(item, (py as Record<string, unknown>)[key])]));
  }
  return coo;
}
