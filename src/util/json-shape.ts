/**
 * The first key found twice in one object, or how deep the value nests past `maxDepth`; null when
 * neither. `text` is JSON that JSON.parse accepted. JSON.parse keeps the last of a key written twice,
 * where a person, a client or a proxy in between may read the first: every reader of JSON an
 * untrusted writer sent (an MCP line, a consult tool call, an advisory agent's answer block) refuses
 * it, so all read one value. A loop with its own stack, never recursion, so no nesting the input's
 * size allows can overflow the call stack. Pure.
 */
export function jsonShapeProblem(text: string, maxDepth: number): string | null {
  const stack: Array<{ keys: Set<string> | null; expectKey: boolean }> = [];
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const top = stack[stack.length - 1];
      if (top?.keys != null && top.expectKey) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (top.keys.has(key)) return `the key ${JSON.stringify(key.slice(0, 64))} appears twice in one object`;
        top.keys.add(key);
        top.expectKey = false;
      }
      i = end;
    } else if (c === '{' || c === '[') {
      stack.push({ keys: c === '{' ? new Set() : null, expectKey: c === '{' });
      if (stack.length > maxDepth) return `it nests deeper than ${maxDepth} levels`;
    } else if (c === '}' || c === ']') {
      stack.pop();
    } else if (c === ',') {
      const top = stack[stack.length - 1];
      if (top?.keys != null) top.expectKey = true;
    }
  }
  return null;
}
