/**
 * Request bodies parsed keeping each number's source text (docs/integration-guide.md, "Invoices"):
 * `JSON.parse`'s reviver receives `context.source` (Node 24), so a number whose text
 * denotes another value than the double it became ("amount":0.0010000000000000001 → 0.001, an
 * integer past 2^53, 1e400) is refused with 400 validation_failed naming the field, never rounded
 * silently. Every other number is exactly what the client wrote, so the field rules after it
 * (e.g. at most 8 decimals) judge the client's own digits. Strings with a lone surrogate are
 * refused the same way (they would reach a service altered), and so is a key repeated in one
 * object (JSON.parse would keep its last value without a word).
 */
import { jsonNumberIsExact, jsonNumberToDecimal } from '@coinvoice/domain/json-money';
import type { Violation } from '@coinvoice/runtime';
import { boundedFieldName, HttpProblem, MAX_PROBLEM_ERRORS } from './problem';

const LONE_SURROGATE = /\p{Cs}/u;


interface NumberSource {
  source: string;
}

/** Each parsed number's source text, by the object or array holding it and its key there. */
const numberSources = new WeakMap<object, Map<string, string>>();

const PLAIN_DECIMAL = /^-?\d+(\.\d+)?$/;

/**
 * `holder[key]`, a number of a body parseJsonExactly read, as a decimal string with the digits the
 * client wrote: its source text when in plain notation ("1.100000000" keeps its nine decimals, so
 * "at most 8 decimals" judges what was sent, as for a string), otherwise (an exponent, "1.1e-7")
 * the decimal of its value. Throws for a value that is not a finite number.
 */
export function writtenDecimal(holder: object, key: string): string {
  const value = (holder as Record<string, unknown>)[key];
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new Error(`${key} is not a finite number`);
  const source = numberSources.get(holder)?.get(key);
  return source !== undefined && PLAIN_DECIMAL.test(source) ? source : jsonNumberToDecimal(value).decimal;
}

/** The parsed body; throws SyntaxError for malformed JSON and HttpProblem for an inexact number. */
export function parseJsonExactly(text: string): unknown {
  const inexact: Array<{ holder: object; key: string; source: string }> = [];
  const invalidText: Array<{ holder: object; key: string }> = [];
  const value: unknown = JSON.parse(text, function (this: object, key: string, parsed: unknown, context?: NumberSource) {
    // A "\ud800" escape makes a lone surrogate, which protobuf's UTF-8 encoding would silently turn
    // into U+FFFD on its way to a service: refused here, for every string field at once.
    const room = inexact.length + invalidText.length < MAX_PROBLEM_ERRORS;
    if (room && typeof parsed === 'string' && LONE_SURROGATE.test(parsed)) invalidText.push({ holder: this, key });
    if (typeof parsed === 'number') {
      // The reviver's `this` is the object or array holding the value: where it sits in the body.
      const source = context?.source;
      if (source === undefined) throw new Error('JSON.parse gave no source text (Node 24 is required)');
      if (room && !jsonNumberIsExact(source, parsed)) inexact.push({ holder: this, key, source });
      let sources = numberSources.get(this);
      if (!sources) numberSources.set(this, (sources = new Map()));
      sources.set(key, source);
    }
    return parsed;
  });
  const repeated = repeatedKeys(text);
  if (inexact.length > 0 || invalidText.length > 0 || repeated.length > 0) {
    const errors: Violation[] = [
      ...repeated.map((field) => ({ field, message: 'appears more than once in the body: a repeated key is refused, never read as its last (or first) value' })),
      ...inexact.map(({ holder, key, source }) => ({
        field: fieldOf(value, holder, key),
        message: `cannot be taken exactly as written (${truncate(source)}): a JSON number with more digits than the field allows is refused, never rounded`,
      })),
      ...invalidText.map(({ holder, key }) => ({ field: fieldOf(value, holder, key), message: 'must be valid Unicode text' })),
    ].slice(0, MAX_PROBLEM_ERRORS);
    throw new HttpProblem(400, 'validation_failed', 'the request body is invalid', errors);
  }
  return value;
}

type Frame = { kind: 'object'; keys: Set<string>; key: string | undefined; expectKey: boolean } | { kind: 'array'; index: number };

/**
 * The dotted paths of keys that appear twice in one object of `text` (well-formed JSON: JSON.parse
 * has read it), which JSON.parse silently resolves to the last value: {"amount":"0.0001",…,"amount":"5"}
 * would pay out 5 while a proxy, a log or the merchant's own check read 0.0001. One pass over the
 * text; keys compared after unescaping ("a\u0062" is "ab").
 */
export function repeatedKeys(text: string): string[] {
  // At most MAX_PROBLEM_ERRORS (docs/http-edge.md#bounded-answers): the scan stops there.
  const repeated: string[] = [];
  const stack: Frame[] = [];
  const path = (): string[] => stack.flatMap((frame, i) => (i === stack.length - 1 ? [] : [frame.kind === 'object' ? (frame.key ?? '') : String(frame.index)]));
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i + 1;
      let escaped = false;
      for (i = start; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) {
          escaped = true;
          i++;
        } else if (d === 0x22) break;
      }
      const top = stack[stack.length - 1];
      if (top?.kind === 'object' && top.expectKey) {
        const raw = text.slice(start, i);
        const key = escaped ? (JSON.parse(`"${raw}"`) as string) : raw;
        if (top.keys.has(key)) {
          repeated.push(fieldName([...path(), key]));
          if (repeated.length === MAX_PROBLEM_ERRORS) return repeated;
        }
        top.keys.add(key);
        top.key = key;
        top.expectKey = false;
      }
    } else if (c === 0x7b /* { */) stack.push({ kind: 'object', keys: new Set(), key: undefined, expectKey: true });
    else if (c === 0x5b /* [ */) stack.push({ kind: 'array', index: 0 });
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) stack.pop();
    else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top?.kind === 'object') top.expectKey = true;
      else if (top) top.index++;
    }
  }
  return repeated;
}

/** The dotted path (the gateway's field names: `amount`, `items.0.amount`) of `holder[key]` in `root`. */
function fieldOf(root: unknown, holder: object, key: string): string {
  if (key === '') return 'body';
  if (root === holder) return fieldName([key]);
  const path = pathTo(root, holder, []);
  if (path === undefined) return fieldName([key]);
  return fieldName([...path, key]);
}

/** A dotted field name (problem.ts cuts a long one). */
function fieldName(path: string[]): string {
  return boundedFieldName(path.join('.'));
}

function pathTo(node: unknown, target: object, path: string[]): string[] | undefined {
  if (node === null || typeof node !== 'object') return undefined;
  if (node === target) return path;
  for (const [k, child] of Object.entries(node)) {
    const found = pathTo(child, target, [...path, k]);
    if (found) return found;
  }
  return undefined;
}

function truncate(source: string): string {
  return source.length > 40 ? `${source.slice(0, 40)}…` : source;
}
