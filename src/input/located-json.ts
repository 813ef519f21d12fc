/**
 * JSON.parse, but with the line and column of a syntax error and of every
 * object key. JSON.parse's own messages differ between Node versions, some
 * give no position at all, and some quote a slice of the text (which must
 * not end up on a CI log if someone pasted a secret into the file). Config
 * files are small, so a plain recursive-descent parser is enough.
 */

export interface Position {
  line: number;
  column: number;
}

export class JsonSyntaxError extends Error {
  override readonly name = "JsonSyntaxError";
  constructor(
    readonly reason: string,
    readonly position: Position,
  ) {
    super(`${reason} at line ${position.line}, column ${position.column}`);
  }
}

export interface LocatedJson {
  value: unknown;
  /** Where a key of a parsed object was written. */
  keyPosition(obj: object, key: string): Position | undefined;
}

function describeChar(c: string): string {
  const code = c.codePointAt(0)!;
  return code < 0x20 || code === 0x7f ? `control character U+${code.toString(16).toUpperCase().padStart(4, "0")}` : JSON.stringify(c);
}

export function parseLocatedJson(input: string): LocatedJson {
  const text = input.charCodeAt(0) === 0xfeff ? input.slice(1) : input;
  const keys = new WeakMap<object, Map<string, number>>();
  let i = 0;

  const positionOf = (offset: number): Position => {
    let line = 1;
    let start = 0;
    for (let k = 0; k < offset && k < text.length; k++) {
      if (text[k] === "\n") {
        line++;
        start = k + 1;
      }
    }
    return { line, column: offset - start + 1 };
  };
  const fail = (reason: string, at = i): never => {
    throw new JsonSyntaxError(reason, positionOf(at));
  };
  const found = () => (i >= text.length ? "the end of the file" : describeChar(text[i]!));
  const skipSpace = () => {
    while (i < text.length && (text[i] === " " || text[i] === "\t" || text[i] === "\n" || text[i] === "\r")) i++;
  };

  const parseString = (): string => {
    const start = i;
    i++; // opening quote
    let out = "";
    for (;;) {
      if (i >= text.length) fail("unterminated string", start);
      const c = text[i]!;
      if (c === '"') {
        i++;
        return out;
      }
      if (c === "\\") {
        const e = text[i + 1];
        const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
        if (e !== undefined && e in simple) {
          out += simple[e];
          i += 2;
        } else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
          i += 6;
        } else fail("invalid escape in a string");
        continue;
      }
      if (c.charCodeAt(0) < 0x20) fail(`${describeChar(c)} inside a string (write it as an escape, e.g. \\n)`);
      out += c;
      i++;
    }
  };

  const parseValue = (): unknown => {
    skipSpace();
    const c = text[i];
    if (c === "{") return parseObject();
    if (c === "[") return parseArray();
    if (c === '"') return parseString();
    const num = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (num && num[0].length > 0 && /[-\d]/.test(c ?? "")) {
      i += num[0].length;
      return Number(num[0]);
    }
    for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return value;
      }
    }
    if (c === "'") return fail("strings must be in double quotes");
    return fail(`expected a value, found ${found()}`);
  };

  const parseObject = (): Record<string, unknown> => {
    const obj: Record<string, unknown> = {};
    const where = new Map<string, number>();
    keys.set(obj, where);
    i++;
    skipSpace();
    if (text[i] === "}") {
      i++;
      return obj;
    }
    for (;;) {
      skipSpace();
      if (text[i] !== '"') {
        if (text[i] === "}") fail("trailing comma before }");
        fail(`expected a property name in double quotes, found ${found()}`);
      }
      const at = i;
      const key = parseString();
      if (where.has(key)) fail(`duplicate key ${JSON.stringify(key)}`, at);
      where.set(key, at);
      skipSpace();
      if (text[i] !== ":") fail(`expected ":" after the property name, found ${found()}`);
      i++;
      Object.defineProperty(obj, key, { value: parseValue(), enumerable: true, writable: true, configurable: true });
      skipSpace();
      if (text[i] === ",") {
        i++;
        continue;
      }
      if (text[i] === "}") {
        i++;
        return obj;
      }
      fail(`expected "," or "}" after a property value, found ${found()}`);
    }
  };

  const parseArray = (): unknown[] => {
    const arr: unknown[] = [];
    i++;
    skipSpace();
    if (text[i] === "]") {
      i++;
      return arr;
    }
    for (;;) {
      skipSpace();
      if (text[i] === "]") fail("trailing comma before ]");
      arr.push(parseValue());
      skipSpace();
      if (text[i] === ",") {
        i++;
        continue;
      }
      if (text[i] === "]") {
        i++;
        return arr;
      }
      fail(`expected "," or "]" after an array element, found ${found()}`);
    }
  };

  skipSpace();
  if (i >= text.length) fail("the file is empty (it should hold a JSON object)");
  const value = parseValue();
  skipSpace();
  if (i < text.length) fail(`unexpected ${found()} after the end of the JSON value`);
  return {
    value,
    keyPosition(obj, key) {
      const at = keys.get(obj)?.get(key);
      return at === undefined ? undefined : positionOf(at);
    },
  };
}
