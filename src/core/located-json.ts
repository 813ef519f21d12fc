/**
 * JSON.parse, but with the line and column of a syntax error and of every
 * object key. JSON.parse's own messages differ between Node versions, some
 * give no position at all, and some quote a slice of the text (which must
 * not end up on a CI log if someone pasted a secret into the file). The text
 * is read by jsonc-parser, held to strict JSON (no comments, no trailing
 * commas); its first error ends the parse, said in words of our own.
 */
// The package's ES build: its CommonJS entry hides its imports from the bundler.
import { printParseErrorCode, visit, type ParseErrorCode } from "jsonc-parser/lib/esm/main.js";

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
  return code < 0x20 || code === 0x7f
    ? `control character U+${code.toString(16).toUpperCase().padStart(4, "0")}`
    : JSON.stringify(c);
}

function positionOf(text: string, offset: number): Position {
  let line = 1;
  let start = 0;
  for (let k = 0; k < offset && k < text.length; k++) {
    if (text[k] === "\n") {
      line++;
      start = k + 1;
    }
  }
  return { line, column: offset - start + 1 };
}

/** An object or array being filled, and for an object the key its next value goes under. */
type Open = { obj: Record<string, unknown>; key?: string } | { arr: unknown[] };

/** A reason, and the offset to point at. */
type Reason = [string, number];

/** The text around a syntax error and the value it is in: what was due at a place, and what was there instead. */
class Surroundings {
  constructor(
    private readonly text: string,
    /** The innermost open value is an object. */
    private readonly inObject: boolean,
    /** No object or array is open. */
    private readonly topLevel: boolean,
  ) {}

  found(at: number): string {
    return at >= this.text.length ? "the end of the file" : describeChar(this.text[at]!);
  }

  afterElement(at: number): Reason {
    return [`expected "," or "]" after an array element, found ${this.found(at)}`, at];
  }

  afterProperty(at: number): Reason {
    return [`expected "," or "}" after a property value, found ${this.found(at)}`, at];
  }

  afterValue(at: number): Reason {
    if (this.topLevel) return [`unexpected ${this.found(at)} after the end of the JSON value`, at];
    return this.inObject ? this.afterProperty(at) : this.afterElement(at);
  }

  /** Something no token of JSON starts with (a comment, a bare word): what was due there, by what precedes it. */
  expected(at: number): Reason {
    const before = this.text.slice(0, at).trimEnd().at(-1);
    if (this.inObject && (before === "{" || before === ","))
      return [`expected a property name in double quotes, found ${this.found(at)}`, at];
    if (before !== undefined && !"[:,".includes(before)) return this.afterValue(at);
    if (this.text[at] === "'") return ["strings must be in double quotes", at];
    return [`expected a value, found ${this.found(at)}`, at];
  }
}

/**
 * What went wrong at `offset` (where jsonc-parser's token starts, `length` long), and where
 * to point: inside a string, at the character that is wrong. `inObject`: the innermost open
 * value is an object; `topLevel`: no object or array is open.
 */
function reasonOf(
  text: string,
  code: ParseErrorCode,
  offset: number,
  length: number,
  { inObject, topLevel }: { inObject: boolean; topLevel: boolean },
): Reason {
  const around = new Surroundings(text, inObject, topLevel);
  const token = text.slice(offset, offset + length);
  switch (printParseErrorCode(code)) {
    case "PropertyNameExpected":
      if (text[offset] === "}") return ["trailing comma before }", offset];
      return [`expected a property name in double quotes, found ${around.found(offset)}`, offset];
    case "ValueExpected":
      if (text[offset] === "]" && text.slice(0, offset).trimEnd().endsWith(","))
        return ["trailing comma before ]", offset];
      return around.expected(offset);
    case "ColonExpected":
      return [`expected ":" after the property name, found ${around.found(offset)}`, offset];
    case "CloseBraceExpected":
      return around.afterProperty(offset);
    case "CloseBracketExpected":
      return around.afterElement(offset);
    case "CommaExpected":
    case "EndOfFileExpected":
      return around.afterValue(offset);
    case "UnexpectedEndOfString":
      // A string ends at a line break or at the end of the file.
      if (offset + length < text.length)
        return [
          `${describeChar(text[offset + length]!)} inside a string (write it as an escape, e.g. \\n)`,
          offset + length,
        ];
      return ["unterminated string", offset];
    case "InvalidCharacter": {
      const at = offset + token.search(/[\u0000-\u001f]/);
      return [`${describeChar(text[at]!)} inside a string (write it as an escape, e.g. \\n)`, at];
    }
    case "InvalidEscapeCharacter":
    case "InvalidUnicode":
      return [
        "invalid escape in a string",
        offset + Math.max(0, token.search(/\\(?:[^"\\/bfnrtu]|u(?![0-9a-fA-F]{4}))/)),
      ];
    case "InvalidNumberFormat":
    case "UnexpectedEndOfNumber": {
      // "1." or "1e": the number is what precedes the character that cannot go on with it.
      const n = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(token)?.[0].length ?? 0;
      return n > 0 ? around.afterValue(offset + n) : around.expected(offset);
    }
    default:
      // InvalidSymbol, and comments (InvalidCommentToken, UnexpectedEndOfComment).
      return around.expected(offset);
  }
}

export function parseLocatedJson(input: string): LocatedJson {
  const text = input.charCodeAt(0) === 0xfeff ? input.slice(1) : input;
  const keys = new WeakMap<object, Map<string, number>>();
  const fail = (reason: string, at: number): never => {
    throw new JsonSyntaxError(reason, positionOf(text, at));
  };
  if (/^[ \t\n\r]*$/.test(text)) fail("the file is empty (it should hold a JSON object)", text.length);
  let value: unknown;
  const open: Open[] = [];
  const put = (v: unknown) => {
    const top = open.at(-1);
    if (!top) value = v;
    else if ("arr" in top) top.arr.push(v);
    // Defined, not assigned: a "__proto__" key stays a plain key.
    else Object.defineProperty(top.obj, top.key!, { value: v, enumerable: true, writable: true, configurable: true });
  };
  visit(
    text,
    {
      onObjectBegin: () => {
        const obj: Record<string, unknown> = {};
        keys.set(obj, new Map());
        put(obj);
        open.push({ obj });
      },
      onObjectProperty: (key, offset) => {
        const top = open.at(-1) as { obj: Record<string, unknown>; key?: string };
        const where = keys.get(top.obj)!;
        if (where.has(key)) fail(`duplicate key ${JSON.stringify(key)}`, offset);
        where.set(key, offset);
        top.key = key;
      },
      onArrayBegin: () => {
        const arr: unknown[] = [];
        put(arr);
        open.push({ arr });
      },
      onObjectEnd: () => void open.pop(),
      onArrayEnd: () => void open.pop(),
      onLiteralValue: (v) => put(v),
      onError: (code, offset, length) => {
        const top = open.at(-1);
        const [reason, at] = reasonOf(text, code, offset, length, {
          inObject: top !== undefined && "obj" in top,
          topLevel: top === undefined,
        });
        fail(reason, at);
      },
    },
    { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false },
  );
  return {
    value,
    keyPosition(obj, key) {
      const at = keys.get(obj)?.get(key);
      return at === undefined ? undefined : positionOf(text, at);
    },
  };
}
