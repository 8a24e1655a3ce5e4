/**
 * The replay report as people read it: a text table for the terminal, and a self-contained HTML
 * page (inline SVG, inline CSS, no script, nothing fetched) with the chart of dispatches per
 * conversation, recorded against the candidate's, and the risk list.
 */
import type { ChartPoint, ConversationList, ReplayReport, Saving } from './replay.ts';
import type { CandidateEnding } from './replay-conversation.ts';

const int = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const one = new Intl.NumberFormat('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

function percent(part: number, whole: number): string {
  return whole > 0 ? `${one.format((100 * part) / whole)}%` : '-';
}

/**
 * Terminal control characters (C0 and C1, DEL) and the bidirectional overrides a recording's
 * strings may hold, matched for escaping: an ESC sequence could clear the screen, an OSC set the
 * window's title, a CR overwrite the line, a bidi override reorder what is shown.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `text` with every control character escaped (`\x1b`, `\r`, `\u202e`): safe to print to a terminal. */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    return (
      NAMED[c] ??
      (code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`)
    );
  });
}

function candidateText(c: CandidateEnding): string {
  if (c.outcome === 'stopped') return `${c.dispatchCount} ${c.reason}`;
  if (c.outcome === 'failed') return `failed at ${c.dispatchCount}: ${c.error}`;
  return 'ran past the recording';
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
        .join('  '),
    )
    .join('\n');
}

function savingRow(label: string, s: Saving, scale = 1, digits = int): string[] {
  return [
    label,
    digits.format(s.recorded / scale),
    digits.format(s.saved / scale),
    percent(s.saved, s.recorded),
  ];
}

function listLines(title: string, list: ConversationList): string[] {
  if (list.count === 0) return [`${title}: none`];
  const lines = [
    `${title}: ${int.format(list.count)}${list.count > list.conversations.length ? ` (the first ${list.conversations.length} listed)` : ''}`,
  ];
  const shown = list.conversations.slice(0, 10);
  for (const c of shown) {
    lines.push(
      `  ${printable(c.conversationId)} (${printable(c.orchestrator)}): recorded ${c.recorded.dispatchCount} ${printable(c.recorded.reason)}, candidate ${printable(candidateText(c.candidate))}`,
    );
  }
  if (list.count > shown.length) {
    lines.push(
      `  … ${list.count - shown.length} more (--json lists the first ${list.conversations.length})`,
    );
  }
  return lines;
}

/** The warning for conversations the candidate could not measure, or undefined when there are none. */
function unmeasuredWarning(report: ReplayReport): string | undefined {
  const { count, fields } = report.unmeasured;
  if (count === 0) return undefined;
  return `on ${int.format(count)} of ${int.format(report.conversations)} conversations (${percent(count, report.conversations)}) the candidate read a field the recording does not have at every dispatch (${fields.join(', ')}): what it measured was undefined throughout, so its verdict on them says nothing. A misspelled field, or one record(state) did not keep?`;
}

/** The report as the CLI prints it; every string from a recording or the candidate is `printable()`. */
export function formatReport(report: ReplayReport): string {
  const n = report.conversations;
  const out = [
    `replayed ${int.format(n)} conversation${n === 1 ? '' : 's'} against ${printable(report.policy)}`,
    '',
    table([
      ['candidate ended them', 'conversations', 'share'],
      ['earlier', int.format(report.earlier), percent(report.earlier, n)],
      ['at the same dispatch', int.format(report.same), percent(report.same, n)],
      [
        'later or unknown',
        int.format(report.later + report.unknown),
        percent(report.later + report.unknown, n),
      ],
    ]),
    '',
    table([
      ['', 'recorded', 'saved', 'share'],
      savingRow('dispatches', report.dispatches),
      savingRow('tokens', report.tokens),
      savingRow('time (s)', report.timeMs, 1000, one),
    ]),
    '',
    ...listLines('cut before they converged (risk)', report.risk),
    ...listLines('ended converged earlier', report.convergedEarlier),
  ];
  if (report.failed.count > 0) out.push(...listLines('the candidate failed', report.failed));
  const notes: string[] = [];
  if (report.later > 0)
    notes.push(`${int.format(report.later)} later (how much later is unknown: no model is called)`);
  if (report.unknown > 0)
    notes.push(
      `${int.format(report.unknown)} unknown (truncated recordings or a failing candidate)`,
    );
  if (report.truncated > 0) notes.push(`${int.format(report.truncated)} truncated recordings`);
  if (report.dispatchesWithoutRecord > 0)
    notes.push(
      `${int.format(report.dispatchesWithoutRecord)} dispatches without record (the candidate saw projection undefined there)`,
    );
  if (report.skippedLines > 0) notes.push(`${int.format(report.skippedLines)} bad lines skipped`);
  if (notes.length > 0) out.push('', ...notes.map((note) => `note: ${note}`));
  const warning = unmeasuredWarning(report);
  if (warning !== undefined) out.push('', `warning: ${printable(warning)}`);
  return `${out.join('\n')}\n`;
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

const COLORS = {
  earlier: '#2b8a3e',
  same: '#1c7ed6',
  later: '#e8590c',
  unknown: '#868e96',
} as const;

/**
 * Where a point goes and how it looks. A conversation the candidate stopped is at (recorded, the
 * candidate's stop). One it never stopped is on the top line when the recorded policy had stopped
 * it (later) or the recording is truncated (unknown); but when the recorded conversation ended
 * without a decision (an error, an abort, the queue running dry) that ending comes anyway: it is
 * on the diagonal, where it ended, as a ring. One where the candidate failed is on the bottom
 * line, as a cross.
 */
type Placement = 'stopped' | 'ran_past' | 'ended_anyway' | 'failed';

function placement(p: ChartPoint): Placement {
  if (p.outcome === 'failed') return 'failed';
  if (p.outcome === 'stopped') return 'stopped';
  return p.comparison === 'same' ? 'ended_anyway' : 'ran_past';
}

/** Scatter of recorded dispatches (x) against the candidate's (y), log scales; ran-past at the top, failed at the bottom. */
function chart(report: ReplayReport): string {
  const W = 640;
  const H = 440;
  const M = { left: 60, right: 20, top: 30, bottom: 70 };
  const max = Math.max(1, ...report.chart.map((p) => Math.max(p.recorded, p.candidate ?? 0)));
  const scale = (v: number, span: number) => (Math.log10(1 + v) / Math.log10(1 + max)) * span;
  const x = (v: number) => M.left + scale(v, W - M.left - M.right);
  const plotH = H - M.top - M.bottom;
  const y = (v: number) => M.top + plotH - scale(v, plotH);
  const TOP = M.top - 12;
  const BOTTOM = M.top + plotH + 30;
  const ticks: number[] = [];
  for (let t = 1; t <= max * 10 && ticks.length < 8; t *= 10) ticks.push(t - 1 < max ? t : max);
  const tickMarks = [...new Set(ticks)]
    .map(
      (t) =>
        `<line x1="${x(t)}" y1="${M.top}" x2="${x(t)}" y2="${M.top + plotH}" class="grid"/><text x="${x(t)}" y="${M.top + plotH + 16}" text-anchor="middle">${int.format(t)}</text>` +
        `<line x1="${M.left}" y1="${y(t)}" x2="${W - M.right}" y2="${y(t)}" class="grid"/><text x="${M.left - 6}" y="${y(t) + 4}" text-anchor="end">${int.format(t)}</text>`,
    )
    .join('');
  const points = report.chart
    .map((p) => {
      const where = placement(p);
      const cx = x(p.recorded).toFixed(1);
      const color = COLORS[p.comparison];
      const data = `data-comparison="${p.comparison}" data-placement="${where}"`;
      const id = escapeHtml(p.conversationId);
      switch (where) {
        case 'stopped':
          return `<circle cx="${cx}" cy="${y(p.candidate ?? 0).toFixed(1)}" r="3" fill="${color}" ${data}><title>${id}: recorded ${p.recorded}, candidate stopped at ${p.candidate}</title></circle>`;
        case 'ran_past':
          return `<circle cx="${cx}" cy="${TOP.toFixed(1)}" r="3" fill="${color}" ${data}><title>${id}: recorded ${p.recorded}, the candidate ran past ${p.comparison === 'unknown' ? 'what was recorded (truncated)' : 'where the recorded policy stopped'}</title></circle>`;
        case 'ended_anyway':
          return `<circle cx="${cx}" cy="${y(p.recorded).toFixed(1)}" r="3.5" fill="none" stroke="${color}" stroke-width="1.5" ${data}><title>${id}: ended at ${p.recorded} without a decision (an error, an abort, the queue ran dry), as it would have with the candidate</title></circle>`;
      }
      // failed
      return `<path d="M${Number(cx) - 3} ${BOTTOM - 3}l6 6m0 -6l-6 6" stroke="${color}" stroke-width="1.5" ${data}><title>${id}: recorded ${p.recorded}, the candidate failed</title></path>`;
    })
    .join('');
  return `<svg id="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="Dispatches per conversation, recorded against the candidate">
<line x1="${x(0)}" y1="${y(0)}" x2="${x(max)}" y2="${y(max)}" class="diagonal"/>${tickMarks}
<text x="${M.left}" y="${M.top - 16}" class="label">ran past where the recorded policy stopped</text>
<text x="${M.left}" y="${BOTTOM + 16}" class="label">the candidate failed</text>
<text x="${(M.left + W - M.right) / 2}" y="${H - 4}" text-anchor="middle" class="label">recorded dispatches</text>
<text x="14" y="${M.top + plotH / 2}" transform="rotate(-90 14 ${M.top + plotH / 2})" text-anchor="middle" class="label">candidate's dispatches</text>
${points}</svg>`;
}

function listTable(list: ConversationList): string {
  if (list.count === 0) return '<p>None.</p>';
  const rows = list.conversations
    .map(
      (c) =>
        `<tr><td>${escapeHtml(c.conversationId)}</td><td>${escapeHtml(c.orchestrator)}</td><td>${c.recorded.dispatchCount} ${escapeHtml(c.recorded.reason)}</td><td>${escapeHtml(candidateText(c.candidate))}</td></tr>`,
    )
    .join('');
  const more =
    list.count > list.conversations.length
      ? `<p>${list.count - list.conversations.length} more not listed.</p>`
      : '';
  return `<table><thead><tr><th>conversation</th><th>orchestrator</th><th>recorded</th><th>candidate</th></tr></thead><tbody>${rows}</tbody></table>${more}`;
}

/** The report as one self-contained HTML page. */
export function renderHtml(report: ReplayReport): string {
  const n = report.conversations;
  const summary = `<table><thead><tr><th></th><th>recorded</th><th>saved</th><th>share</th></tr></thead><tbody>${[
    ['dispatches', report.dispatches, 1],
    ['tokens', report.tokens, 1],
    ['time (s)', report.timeMs, 1000],
  ]
    .map(([label, s, div]) => {
      const saving = s as Saving;
      const d = div as number;
      const fmt = d === 1 ? int : one;
      return `<tr><td>${label}</td><td>${fmt.format(saving.recorded / d)}</td><td>${fmt.format(saving.saved / d)}</td><td>${percent(saving.saved, saving.recorded)}</td></tr>`;
    })
    .join('')}</tbody></table>`;
  const legend = (Object.keys(COLORS) as (keyof typeof COLORS)[])
    .map(
      (k) => `<span><i style="background:${COLORS[k]}"></i>${k} (${int.format(report[k])})</span>`,
    )
    .join(' ');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Replay against ${escapeHtml(report.policy)}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#212529}h1{overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .8em;border-bottom:1px solid #dee2e6;text-align:right}
td:first-child,th:first-child{text-align:left}
svg text{font-size:11px;fill:#495057}.label{font-size:12px}.grid{stroke:#f1f3f5}.diagonal{stroke:#adb5bd;stroke-dasharray:4 3}
.warning{background:#fff3bf;border-left:4px solid #f08c00;padding:.5em .8em}
.legend span{margin-right:1em}.legend i{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px}
</style></head><body>
<h1>Replay of ${int.format(n)} conversation${n === 1 ? '' : 's'} against <code>${escapeHtml(report.policy)}</code></h1>
<p>The candidate ended ${int.format(report.earlier)} earlier (${percent(report.earlier, n)}), ${int.format(report.same)} at the same dispatch (${percent(report.same, n)}) and ${int.format(report.later + report.unknown)} later or unknown (${percent(report.later + report.unknown, n)}).</p>
${unmeasuredWarning(report) === undefined ? '' : `<p class="warning" id="unmeasured"><strong>Warning:</strong> ${escapeHtml(unmeasuredWarning(report) as string)}</p>\n`}${summary}
<h2>Dispatches per conversation</h2>
<p class="legend">${legend}</p>
${chart(report)}
<p>${report.chart.length < n ? `${int.format(report.chart.length)} of ${int.format(n)} conversations, sampled evenly. ` : ''}Points below the diagonal stopped earlier than recorded and points on it at the same dispatch; rings on the diagonal are conversations that ended without a decision (an error, an abort, the queue running dry) where the candidate had not stopped, an ending that would have come anyway; points on the top line ran past where the recorded policy stopped (later) or past a truncated recording (unknown); crosses on the bottom line are conversations where the candidate failed.</p>
<h2>Cut before they converged (risk): ${int.format(report.risk.count)}</h2>
${listTable(report.risk)}
<h2>Ended converged earlier: ${int.format(report.convergedEarlier.count)}</h2>
${listTable(report.convergedEarlier)}
</body></html>
`;
}
