import { Kind, OptionalKind, ReadonlyKind, type TSchema } from '@sinclair/typebox';

/**
 * TypeBox schemas written out as plain TypeScript types, for the typed client's published types
 * (src/programs/client/types.ts), which may not refer to the service's modules or to TypeBox.
 * Each type is what `Static<typeof Schema>` gives (test/programs/client/types.test.ts checks it
 * at compile time); a kind this writer does not know throws, so a new construct cannot slip through.
 * A schema equal to one of `named` (other than the one being written) is written as that name.
 */
export function typeScriptTypes(named: Record<string, TSchema>, header: string): string {
  const byShape = new Map<string, string>();
  for (const [name, schema] of Object.entries(named)) {
    if (schema[Kind] === 'Object' && !byShape.has(shape(schema))) byShape.set(shape(schema), name);
  }
  const blocks = Object.entries(named).map(([name, schema]) => {
    const doc = typeof schema.description === 'string' ? `${comment(schema.description, '')}` : '';
    return `${doc}export type ${name} = ${write(schema, '', (s) => (byShape.get(shape(s)) === name ? undefined : byShape.get(shape(s))))};\n`;
  });
  return `${header}\n\n${blocks.join('\n')}`;
}

/** The schema's JSON with its TypeBox markers (symbols), so that `Optional(X)` and `X` differ. */
function shape(schema: TSchema): string {
  return JSON.stringify(schema, function (this: Record<string | symbol, unknown>, _key, value: unknown) {
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      const v = value as Record<string | symbol, unknown>;
      return { ...v, '~kind': v[Kind], '~optional': v[OptionalKind], '~readonly': v[ReadonlyKind] };
    }
    return value;
  });
}

function comment(text: string, indent: string): string {
  return `${indent}/** ${text.replace(/\*\//g, '*\\/').replace(/\n/g, ' ')} */\n`;
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

function write(schema: TSchema, indent: string, nameOf: (s: TSchema) => string | undefined): string {
  const kind = schema[Kind];
  switch (kind) {
    case 'String':
      return 'string';
    case 'Integer':
    case 'Number':
      return 'number';
    case 'Boolean':
      return 'boolean';
    case 'Null':
      return 'null';
    case 'Unknown':
      return 'unknown';
    case 'Literal':
      return JSON.stringify(schema.const);
    case 'Unsafe':
      // Type.Unsafe<T> carries T only in the compiler's view; the service declares string ones only.
      if (schema.type === 'string') return 'string';
      throw new Error(`typeScriptTypes: an Unsafe schema of type ${String(schema.type)}`);
    case 'Union':
      return (schema.anyOf as TSchema[]).map((s) => write(s, indent, nameOf)).join(' | ');
    case 'Array': {
      const items = schema.items as TSchema;
      const item = write(items, indent, nameOf);
      return items[Kind] === 'Union' ? `(${item})[]` : `${item}[]`;
    }
    case 'Record': {
      const [[pattern, value] = []] = Object.entries((schema.patternProperties ?? {}) as Record<string, TSchema>);
      const key = pattern === '^(.*)$' ? 'string' : pattern === '^(0|[1-9][0-9]*)$' ? 'number' : undefined;
      if (key === undefined || value === undefined) throw new Error(`typeScriptTypes: a record keyed by ${String(pattern)}`);
      return `{ [key: ${key}]: ${write(value, indent, nameOf)} }`;
    }
    case 'Object': {
      const name = nameOf(schema);
      if (name !== undefined) return name;
      if (schema.patternProperties !== undefined || (typeof schema.additionalProperties === 'object' && schema.additionalProperties !== null)) {
        throw new Error('typeScriptTypes: an object with typed additional properties');
      }
      const properties = Object.entries((schema.properties ?? {}) as Record<string, TSchema>);
      if (properties.length === 0) return '{}';
      const inner = `${indent}  `;
      const lines = properties.map(([key, property]) => {
        const doc = typeof property.description === 'string' ? comment(property.description, inner) : '';
        const readonly = property[ReadonlyKind] === 'Readonly' ? 'readonly ' : '';
        const optional = property[OptionalKind] === 'Optional' ? '?' : '';
        return `${doc}${inner}${readonly}${IDENTIFIER.test(key) ? key : JSON.stringify(key)}${optional}: ${write(property, inner, nameOf)};`;
      });
      return `{\n${lines.join('\n')}\n${indent}}`;
    }
    default:
      throw new Error(`typeScriptTypes: no writer for a ${kind} schema`);
  }
}
