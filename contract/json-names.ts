/**
 * The first member name that repeats within one object of a JSON text, at any depth, with the
 * JSON pointer of that object; undefined when every object's names are distinct. JSON.parse keeps
 * the last of repeated names, and another reader may keep the first: a body, a JWT or a signed
 * payload with a repeated name is refused rather than read one way here and another elsewhere.
 * Both processes refuse such texts by this one reading: the API's bodies and tokens, the signer's
 * requests and owner-signed payloads. Names are compared after unescaping (`"\u0065mail"` repeats `"email"`). One pass, no recursion:
 * the text is one that JSON.parse accepted, so only strings and brackets need telling apart.
 */
export function duplicateName(json: string): { pointer: string; name: string } | undefined {
  // Per open bracket: the names seen (objects) or null (arrays), and the key it sits under.
  const stack: Array<{ names: Set<string> | null; under: string }> = [];
  let lastName = '';
  let index = -1;
  const indexes: number[] = [];
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) {
      // { [ : opened under the last name (in an object) or the array index.
      const parent = stack[stack.length - 1];
      const under = parent === undefined ? '' : parent.names ? lastName : String(index);
      stack.push({ names: c === 0x7b ? new Set() : null, under });
      indexes.push(index);
      index = 0;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      index = indexes.pop() ?? -1;
    } else if (c === 0x2c) {
      index++;
    } else if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      while (j < json.length && json.charCodeAt(j) !== 0x22) {
        if (json.charCodeAt(j) === 0x5c) {
          escaped = true;
          j += 2;
        } else j++;
      }
      const start = i;
      i = j;
      const top = stack[stack.length - 1];
      if (!top?.names) continue;
      let k = j + 1;
      while (k < json.length && (json.charCodeAt(k) === 0x20 || json.charCodeAt(k) === 0x09 || json.charCodeAt(k) === 0x0a || json.charCodeAt(k) === 0x0d)) k++;
      if (json.charCodeAt(k) !== 0x3a) continue; // not followed by ':': a value
      const name = escaped ? (JSON.parse(json.slice(start, j + 1)) as string) : json.slice(start + 1, j);
      if (top.names.has(name)) {
        const pointer = stack
          .slice(1)
          .map((f) => `/${f.under.replace(/~/g, '~0').replace(/\//g, '~1')}`)
          .join('');
        return { pointer: pointer || '/', name };
      }
      top.names.add(name);
      lastName = name;
    }
  }
  return undefined;
}
