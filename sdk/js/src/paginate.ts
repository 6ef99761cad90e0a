/** The query every list endpoint takes (`page_number` is 0-based). */
export interface PageQuery {
  page_number: number;
  page_size: number;
}

export interface PaginateOptions {
  /** Items per request, 1 to 1000 (the server's limit); default 100 (the server's default). */
  pageSize?: number;
}

/** The server clamps larger pages to this, so a larger size would never see a short page. */
const MAX_PAGE_SIZE = 1000;

function pageSizeOf(opts?: PaginateOptions): number {
  const size = opts?.pageSize ?? 100;
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) {
    throw new RangeError(`pageSize must be an integer from 1 to ${MAX_PAGE_SIZE}, not ${size}`);
  }
  return size;
}

/**
 * Every item of a list endpoint, page after page (0, 1, …), until a page shorter than the
 * page size (the last one):
 *
 * ```ts
 * for await (const key of paginate((q) => client.listApiKeys(q))) console.log(key.name);
 * ```
 *
 * Pages are fetched lazily, one request at a time; an error rejects the iteration.
 */
export function paginate<T>(
  fetchPage: (q: PageQuery) => Promise<T[]>,
  opts?: PaginateOptions,
): AsyncIterable<T> {
  const pageSize = pageSizeOf(opts);
  return {
    async *[Symbol.asyncIterator]() {
      for (let page_number = 0; ; page_number++) {
        const items = await fetchPage({ page_number, page_size: pageSize });
        if (!Array.isArray(items)) throw new TypeError(`page ${page_number} is not an array`);
        yield* items;
        if (items.length < pageSize) return;
      }
    },
  };
}

/** Every item of a list endpoint in one array (see {@link paginate}). */
export async function listAll<T>(
  fetchPage: (q: PageQuery) => Promise<T[]>,
  opts?: PaginateOptions,
): Promise<T[]> {
  const all: T[] = [];
  for await (const item of paginate(fetchPage, opts)) all.push(item);
  return all;
}
