import type { CustodyClient, OPERATIONS, OperationId } from '../../src/programs/client/index.js';

/**
 * The typed client's reply for a request the tests write as a method and a path: the path is
 * matched, segment by segment, against the operation table of `src/programs/client` (a `{param}` takes
 * any one segment but a word the table uses literally), and the reply is that operation's.
 * A path no operation has (an operational route, a probe of an unknown one) is read as `unknown`.
 */
type Split<P extends string> = P extends `${infer Head}/${infer Tail}` ? [Head, ...Split<Tail>] : [P];
type WithoutQuery<P extends string> = P extends `${infer Path}?${string}` ? Path : P;
type Param = `{${string}}`;
type Template<O extends OperationId> = (typeof OPERATIONS)[O][1];
type LiteralWord = Exclude<{ [O in OperationId]: Split<Template<O>>[number] }[OperationId], Param>;

type SegmentMatches<S extends string, T extends string> = T extends Param ? (S extends '' | LiteralWord ? false : true) : S extends T ? true : false;
type Matches<S extends readonly string[], T extends readonly string[]> = S extends [infer A extends string, ...infer AR extends string[]]
  ? T extends [infer B extends string, ...infer BR extends string[]]
    ? SegmentMatches<A, B> extends true
      ? Matches<AR, BR>
      : false
    : false
  : T extends []
    ? true
    : false;

export type OperationFor<M extends string, P extends string> = P extends string
  ? {
      [O in OperationId]: (typeof OPERATIONS)[O][0] extends M ? (Matches<Split<WithoutQuery<P>>, Split<Template<O>>> extends true ? O : never) : never;
    }[OperationId]
  : never;

/** What a successful answer to `M P` holds, as the typed client returns it. */
export type SuccessBody<M extends string, P extends string> = [OperationFor<M, P>] extends [never]
  ? unknown
  : Awaited<ReturnType<CustodyClient[OperationFor<M, P>]>>;
