// Drives Debian's chromium (headless, through playwright-core) over a rendered matrix page and
// prints what it saw as one JSON object; test_matrix_browser.py makes the assertions.
//   node matrix_browser.js URL SCREENSHOT_DIR
// playwright-core is found through NODE_PATH (reports/.browser/node_modules).
"use strict";
const { chromium } = require("playwright-core");

const [url, shots] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
  "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
  "--disable-extensions", "--metrics-recording-only", "--no-default-browser-check"];

async function open(browser, width, height, obs, tag, hash) {
  const ctx = await browser.newContext({ viewport: { width, height } });
  const page = await ctx.newPage();
  page.on("request", (r) => obs.requests.push(r.url()));
  page.on("console", (m) => { if (m.type() === "error") obs.console_errors.push(tag + ": " + m.text()); });
  page.on("pageerror", (e) => obs.console_errors.push(tag + ": " + String(e)));
  await page.goto(url + (hash || ""), { waitUntil: "load" });
  await page.waitForSelector("body[data-ready='1']", { timeout: 15000 });
  return { ctx, page };
}

const shot = (page, name, full) => page.screenshot({ path: `${shots}/${name}`, fullPage: !!full });

// every row of the matrix: its clause id, and the classes of its cell buttons
const matrixRows = (page) => page.$$eval("#t-matrix tbody tr:not(.grp)", (trs) => trs.map((tr) => ({
  clause: tr.querySelector("th").textContent.replace(/(MUST|SHOULD|MAY|INFO)$/, ""),
  cells: Array.from(tr.querySelectorAll("button.c")).map((b) => b.className),
})));
const matrixLibs = (page) => page.$$eval("#t-matrix thead tr:first-child th[scope=colgroup]", (ths) => ths.map((t) => t.textContent));
const dialogState = (page) => page.evaluate(() => {
  const d = document.getElementById("detail");
  return { open: d.open, title: document.getElementById("d-title").textContent,
    text: document.getElementById("d-body").innerText, pres: document.querySelectorAll("#d-body pre").length,
    active: document.activeElement ? (document.activeElement.id || document.activeElement.className) : "" };
});

// Escape, then wait (at most 3 s) for the dialog's close handler: the close event is queued as a task,
// and the handler is what clears "open=" from the hash and gives focus back. Reading either before it
// ran would be a race, not the page's fault; if the page never clears it, the assertions say so.
const escape = async (page) => {
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => !document.getElementById("detail").open && !location.hash.includes("open="),
    null, { timeout: 3000 }).catch(() => {});
};

(async () => {
  const obs = { requests: [], console_errors: [], wide: {}, narrow: {}, deep: {} };
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    // ---------------- 1280 px
    let { ctx, page } = await open(browser, 1280, 900, obs, "1280");
    const w = obs.wide;
    w.title = await page.title();
    w.rows = (await matrixRows(page)).length;
    w.libs = await matrixLibs(page);
    w.groups = await page.$$eval("#f-group option", (os) => os.map((o) => o.value).filter(Boolean));
    w.interop_tables = await page.$$eval("#interop-body table", (ts) => ts.length);
    w.regressed = await page.$$eval("#history-body .chg.regressed", (x) => x.length);
    w.fixed = await page.$$eval("#history-body .chg.fixed", (x) => x.length);
    w.banner = await page.$eval("#banner", (b) => b.innerText);
    w.legend = await page.$eval("#legend", (b) => b.innerText);
    w.page_overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await shot(page, "matrix-1280.png", false);
    await shot(page, "matrix-1280-full.png", true);
    await page.$eval("#h-interop", (e) => e.scrollIntoView());
    await shot(page, "matrix-1280-interop.png", false);
    await page.$eval("#h-history", (e) => e.scrollIntoView());
    await shot(page, "matrix-1280-history.png", false);
    await page.evaluate(() => window.scrollTo(0, 0));

    // filters: library
    await page.selectOption("#f-lib", "numpy");
    w.lib_filter = { libs: await matrixLibs(page),
      interop_labels: await page.$$eval("#interop-body tbody tr", (trs) => trs.map((tr) => tr.querySelector("th").textContent + " -> " +
        Array.from(tr.querySelectorAll("button.c")).length)),
      history: await page.$$eval("#history-body h3", (hs) => hs.map((h) => h.textContent)) };
    await shot(page, "matrix-1280-filter-numpy.png", false);
    // + clause group
    await page.selectOption("#f-group", "CAP");
    w.group_filter = { clauses: (await matrixRows(page)).map((r) => r.clause) };
    // + failures only
    await page.check("#f-fail");
    const failRows = await matrixRows(page);
    w.fail_filter = { rows: failRows.length, every_row_failing: failRows.every((r) => r.cells.some((c) => /v-(fail|warn|crash|timeout)|\bcf\b/.test(c))),
      clauses: failRows.map((r) => r.clause) };
    await shot(page, "matrix-1280-filter-numpy-cap-failures.png", false);
    // failures only over everything
    await page.selectOption("#f-lib", "");
    await page.selectOption("#f-group", "");
    const allFail = await matrixRows(page);
    w.fail_all = { rows: allFail.length, every_row_failing: allFail.every((r) => r.cells.some((c) => /v-(fail|warn|crash|timeout)|\bcf\b/.test(c))) };
    await shot(page, "matrix-1280-failures-only.png", false);
    await page.uncheck("#f-fail");
    w.reset_rows = (await matrixRows(page)).length;
    // filters: device
    await page.selectOption("#f-device", "cuda");
    w.device_filter = { libs: await matrixLibs(page), rows: (await matrixRows(page)).length,
      headline: await page.$$eval("#headline-body tbody tr td:first-child", (tds) => tds.map((t) => t.textContent)),
      hash: await page.evaluate(() => location.hash) };
    await shot(page, "matrix-1280-filter-cuda.png", false);
    await page.selectOption("#f-device", "cpu");
    w.device_cpu_libs = await matrixLibs(page);
    await page.selectOption("#f-device", "");

    // drill-down with the mouse: the first fail cell
    const failBtn = await page.$("#t-matrix button.c.v-fail");
    w.fail_label = await failBtn.getAttribute("aria-label");
    await failBtn.click();
    w.drill = await dialogState(page);
    await shot(page, "matrix-1280-drilldown.png", false);
    await escape(page);
    w.after_escape = await dialogState(page);
    w.focus_back = await page.evaluate((label) => document.activeElement && document.activeElement.getAttribute("aria-label") === label, w.fail_label);

    // a conflict cell
    const cf = await page.$("#t-matrix button.c.cf");
    w.has_conflict_cell = !!cf;
    if (cf) { await cf.click(); w.conflict = await dialogState(page); await escape(page); }
    // an interop cell that did not pass
    const ib = await page.$("#interop-body button.c:not(.v-pass)");
    if (ib) { await ib.click(); w.interop_drill = await dialogState(page); await shot(page, "matrix-1280-interop-drilldown.png", false); await escape(page); }

    // keyboard only: Tab from the top reaches the filters and then a cell; arrows move; Enter and Space open.
    // A fresh load of the bare URL, not a reload: the dialog's close event (which clears "open=" from the
    // hash) is queued as a task, so a reload right after Escape can race it and reopen the dialog.
    await page.goto(url, { waitUntil: "load" });
    await page.waitForSelector("body[data-ready='1']");
    w.tab_start = await dialogState(page);
    const tabs = [];
    for (let i = 0; i < 120; i++) {
      await page.keyboard.press("Tab");
      const a = await page.evaluate(() => { const e = document.activeElement; return e ? (e.id || e.tagName + "." + e.className) : ""; });
      tabs.push(a);
      if (/^BUTTON\.c/.test(a)) break;
    }
    w.tab_order = tabs;
    const k0 = await page.evaluate(() => document.activeElement.getAttribute("data-k"));
    await page.keyboard.press("ArrowRight");
    const k1 = await page.evaluate(() => document.activeElement.getAttribute("data-k"));
    await page.keyboard.press("ArrowDown");
    const k2 = await page.evaluate(() => document.activeElement.getAttribute("data-k"));
    w.arrows = [k0, k1, k2];
    await page.keyboard.press("Enter");
    w.enter = await dialogState(page);
    await escape(page);
    w.enter_closed = await dialogState(page);
    await page.keyboard.press(" ");
    w.space = await dialogState(page);
    await shot(page, "matrix-1280-keyboard-dialog.png", false);
    await escape(page);
    w.space_closed = await dialogState(page);
    w.focus_visible = await page.evaluate(() => getComputedStyle(document.activeElement, ":focus-visible") !== null &&
      getComputedStyle(document.activeElement).outlineStyle);
    await ctx.close();

    // ---------------- a new user: headline -> library section -> finding -> reproducer; the link lasts
    ({ ctx, page } = await open(browser, 1280, 900, obs, "deep"));
    const d = obs.deep = {};
    d.headline_libs = await page.$$eval("#headline-body tbody tr td:first-child", (tds) => tds.map((t) => t.textContent));
    d.sections = await page.$$eval("#libs-body .lib", (xs) => xs.map((x) => x.id));
    const go = await page.$("#headline-body a.go");
    d.go_href = await go.getAttribute("href");
    await go.click();
    d.hash_after_go = await page.evaluate(() => location.hash);
    const chip = await page.$(d.go_href + " a.fv");
    d.chip = await chip.getAttribute("id");
    await chip.click();
    await page.waitForFunction(() => document.getElementById("detail").open);
    d.clicked = await dialogState(page);
    d.link = await page.evaluate(() => location.href);
    await shot(page, "matrix-1280-deep-link.png", false);
    await ctx.close();
    ({ ctx, page } = await open(browser, 1280, 900, obs, "deep-open", "#" + d.link.split("#")[1]));
    d.followed = await dialogState(page);
    d.followed_hash = await page.evaluate(() => location.hash);
    await escape(page);
    d.closed_hash = await page.evaluate(() => location.hash);
    await ctx.close();
    ({ ctx, page } = await open(browser, 1280, 900, obs, "deep-filter", "#lib=numpy&group=CAP&fail=1"));
    d.filters = await page.evaluate(() => [document.getElementById("f-lib").value, document.getElementById("f-group").value,
      document.getElementById("f-fail").checked]);
    d.filter_libs = await matrixLibs(page);
    await page.selectOption("#f-lib", "torch");
    d.hash_after_select = await page.evaluate(() => location.hash);
    await ctx.close();
    ({ ctx, page } = await open(browser, 1280, 900, obs, "deep-device", "#device=cuda"));
    d.device_link = { value: await page.evaluate(() => document.getElementById("f-device").value), libs: await matrixLibs(page) };
    await ctx.close();
    ({ ctx, page } = await open(browser, 1280, 900, obs, "deep-bare", "#" + d.chip));
    d.bare = await dialogState(page);
    await ctx.close();

    // ---------------- 390 px
    ({ ctx, page } = await open(browser, 390, 844, obs, "390"));
    const n = obs.narrow;
    n.page_overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    n.filters_visible = await page.$$eval("#f-lib, #f-group, #f-device, #f-fail", (els) => els.map((e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.right <= window.innerWidth + 1; }));
    n.font_px = await page.evaluate(() => parseFloat(getComputedStyle(document.querySelector("#t-matrix button.c")).fontSize));
    n.scroller = await page.evaluate(() => { const s = document.querySelector("#t-matrix").parentElement; return { client: s.clientWidth, scroll: s.scrollWidth, overflowX: getComputedStyle(s).overflowX }; });
    await shot(page, "matrix-390.png", false);
    await page.$eval("#h-matrix", (e) => e.scrollIntoView());
    await shot(page, "matrix-390-table.png", false);
    await page.selectOption("#f-lib", "torch");
    await page.check("#f-fail");
    n.fail_rows = (await matrixRows(page)).length;
    await page.$eval("#h-matrix", (e) => e.scrollIntoView());
    await shot(page, "matrix-390-filter-torch-failures.png", false);
    const nb = await page.$("#t-matrix button.c:not(.v-pass)");
    await nb.focus();
    await page.keyboard.press("Enter");
    n.drill = await dialogState(page);
    n.dialog_box = await page.$eval("#detail", (d) => { const r = d.getBoundingClientRect(); return { left: r.left, right: r.right, width: r.width }; });
    await shot(page, "matrix-390-drilldown.png", false);
    await escape(page);
    n.after_escape = await dialogState(page);
    await ctx.close();
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(obs) + "\n");
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + "\n"); process.exit(1); });
