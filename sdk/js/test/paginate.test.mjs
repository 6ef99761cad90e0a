// paginate and listAll over a fake list endpoint.
import assert from "node:assert/strict";
import { test } from "node:test";

import { listAll, paginate } from "@appliance/sdk";

/** A fake list endpoint over `total` items, recording each query. */
function fakeList(total) {
  const items = Array.from({ length: total }, (_, i) => ({ id: i }));
  const calls = [];
  const fetchPage = async (q) => {
    calls.push({ ...q });
    return items.slice(q.page_number * q.page_size, (q.page_number + 1) * q.page_size);
  };
  return { items, calls, fetchPage };
}

test("pages until a short page, with the page size asked", async () => {
  const { items, calls, fetchPage } = fakeList(25);
  const got = [];
  for await (const item of paginate(fetchPage, { pageSize: 10 })) got.push(item);
  assert.deepEqual(got, items);
  assert.deepEqual(calls, [
    { page_number: 0, page_size: 10 },
    { page_number: 1, page_size: 10 },
    { page_number: 2, page_size: 10 },
  ]);
});

test("an exact multiple ends with one empty page", async () => {
  const { items, calls, fetchPage } = fakeList(20);
  assert.deepEqual(await listAll(fetchPage, { pageSize: 10 }), items);
  assert.equal(calls.length, 3);
  assert.deepEqual(calls.at(-1), { page_number: 2, page_size: 10 });
});

test("the default page size is the server's, 100", async () => {
  const { calls, fetchPage } = fakeList(150);
  assert.equal((await listAll(fetchPage)).length, 150);
  assert.deepEqual(calls, [
    { page_number: 0, page_size: 100 },
    { page_number: 1, page_size: 100 },
  ]);
});

test("pages are fetched lazily: breaking out stops the requests", async () => {
  const { calls, fetchPage } = fakeList(1000);
  let n = 0;
  for await (const _ of paginate(fetchPage, { pageSize: 5 })) {
    if (++n === 7) break;
  }
  assert.equal(calls.length, 2);
});

test("an error rejects the iteration; bad page sizes are refused", async () => {
  await assert.rejects(
    listAll(async (q) => {
      if (q.page_number === 1) throw new Error("boom");
      return [1, 2];
    }, { pageSize: 2 }),
    /boom/,
  );
  for (const pageSize of [0, 1001, 2.5, -1]) {
    assert.throws(() => paginate(async () => [], { pageSize }), /pageSize must be an integer from 1 to 1000/);
  }
  await assert.rejects(listAll(async () => ({ not: "an array" })), /not an array/);
});
