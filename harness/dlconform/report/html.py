"""index.html: the merged matrix as one self-contained page.

Inline CSS and JS, the view model (matrix_view.build) embedded as JSON; a Content-Security-Policy
of default-src 'none' keeps the browser from fetching anything. Views: the headline per library
version, the findings per library (noise folded into one line per version), library x clause,
producer x consumer interop per tier (failures over checked), version history per library,
conflicts, runs. Every cell is a button that opens a dialog with the messages, the reproducers
and the clause text (Enter/Space opens, Escape closes, arrow keys move between cells). Filters:
library, clause group, device (the columns of tensors on that device, `cpu` or `cuda`, and the
clauses judged there; the interop tables are not filtered by it), failures only.

The URL hash holds the view: `#lib=numpy&group=CAP&device=cuda&fail=1&open=ANCHOR` (any part may be left
out; a bare `#ANCHOR` opens it too). ANCHOR is a finding's or a cell's lasting anchor
(matrix_findings: `numpy-2.4.6-consumer-LAY-09`, `numpy-2.4.6-LAY-09`); the page keeps the hash
up to date, so a copied link opens the same view.
"""
import html as _html
import json

from .matrix_view import build as build_view

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'")


def embed_json(data):
    """JSON safe inside <script type="application/json">: no '<' survives, so no '</script>'."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render(doc, view=None, title="DLPack compatibility matrix"):
    view = view if view is not None else build_view(doc)
    return (_TEMPLATE.replace("@@CSP@@", CSP).replace("@@TITLE@@", _html.escape(title))
            .replace("@@CSS@@", _CSS).replace("@@JS@@", _JS).replace("@@DATA@@", embed_json(view)))


_CSS = r"""
:root{--pass:#cdeed3;--pass-fg:#0b4d1a;--warn:#fde8a6;--warn-fg:#5c4300;--unsupported:#e4e6ea;
--unsupported-fg:#3a3f47;--skip:#f4f5f7;--skip-fg:#555b63;--fail:#f6b9b9;--fail-fg:#6b0000;
--timeout:#ffcf9e;--timeout-fg:#5a2a00;--crash:#b3261e;--crash-fg:#fff;--focus:#0b57d0;--line:#d0d4da;
--muted:#59606b;--bg:#fff;--fg:#1b1f24}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header,main,#filters,#banner,.legend,.top{padding:0 16px}
header h1{font-size:1.5rem;margin:14px 0 4px}
#meta{margin:0 0 10px;color:var(--muted)}
h2{font-size:1.2rem;margin:22px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:1.02rem;margin:14px 0 6px}
#filters{display:flex;flex-wrap:wrap;gap:8px 18px;align-items:center;position:sticky;top:0;z-index:5;
background:#f6f8fa;border-bottom:1px solid var(--line);padding-top:8px;padding-bottom:8px}
#filters label{display:flex;align-items:center;gap:6px;font-weight:600}
#filters select{font:inherit;padding:4px 6px;min-width:8em;max-width:60vw}
#filters input[type=checkbox]{width:18px;height:18px}
#f-count{color:var(--muted)}
.legend{display:flex;flex-wrap:wrap;gap:6px 12px;margin:10px 0;color:var(--muted);font-size:.9rem;align-items:center}
.legend span.v{display:inline-block;min-width:1.9em;text-align:center;border-radius:4px;padding:0 4px;font-weight:700}
.scroll{overflow:auto;max-width:100%;border:1px solid var(--line);border-radius:6px;max-height:80vh}
table{border-collapse:separate;border-spacing:0;font-size:.9rem}
th,td{border-bottom:1px solid var(--line);border-right:1px solid var(--line);padding:0;text-align:center;vertical-align:middle}
thead th{position:sticky;top:0;background:#f6f8fa;z-index:2;padding:4px 6px;font-weight:600;white-space:nowrap}
thead tr.sub th{top:var(--h1,1.9em);font-weight:400;font-size:.8rem;color:var(--muted)}
th.rowh{position:sticky;left:0;background:#fff;z-index:1;text-align:left;padding:3px 8px;white-space:nowrap;font-weight:600}
thead th.rowh{z-index:3;background:#f6f8fa}
tr.grp th{background:#eef1f5;text-align:left;padding:5px 8px;position:sticky;left:0;z-index:1}
.lvl{display:inline-block;font-size:.68rem;font-weight:700;border-radius:3px;padding:0 4px;margin-left:6px;vertical-align:1px;border:1px solid}
.lvl.MUST{color:#6b0000;border-color:#b3261e}.lvl.SHOULD{color:#5c4300;border-color:#a37700}
.lvl.MAY,.lvl.INFO{color:var(--muted);border-color:#9aa0a6}
button.c{display:block;width:100%;min-width:2.6em;min-height:2em;border:0;margin:0;font:inherit;font-weight:700;cursor:pointer;padding:2px 4px;white-space:nowrap}
button.c:focus-visible,button:focus-visible,select:focus-visible,input:focus-visible,a:focus-visible{outline:3px solid var(--focus);outline-offset:-3px}
button.c.cf{background-image:repeating-linear-gradient(45deg,transparent 0 5px,rgba(0,0,0,.12) 5px 7px)}
.v-pass{background:var(--pass);color:var(--pass-fg)}.v-warn{background:var(--warn);color:var(--warn-fg)}
.v-unsupported{background:var(--unsupported);color:var(--unsupported-fg)}.v-skip{background:var(--skip);color:var(--skip-fg)}
.v-fail{background:var(--fail);color:var(--fail-fg)}.v-timeout{background:var(--timeout);color:var(--timeout-fg)}
.v-crash{background:var(--crash);color:var(--crash-fg)}.v-error{background:#fff;color:#6b0000;border:1px dashed #6b0000}
td.none{background:repeating-linear-gradient(-45deg,#fff 0 4px,#f3f3f3 4px 8px)}
.chg{font-size:.75rem;font-weight:700;display:block}.chg.regressed{color:#b3261e}.chg.fixed{color:#0b6b24}
.box{border-radius:6px;padding:8px 12px;margin:10px 0;border:1px solid}
.box.bad{background:#fdecea;border-color:#e3a29c}.box.note{background:#fff8e1;border-color:#e6c75a}
.muted{color:var(--muted)}
table.plain{font-size:.85rem}table.plain td,table.plain th{padding:4px 8px;text-align:left;vertical-align:top}
table.plain thead th{position:static}
code,pre{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:.85rem}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:8px;overflow:auto;max-height:22em;white-space:pre}
dialog{width:min(960px,96vw);max-height:90vh;border:1px solid var(--line);border-radius:10px;padding:0;box-shadow:0 10px 40px rgba(0,0,0,.3)}
dialog::backdrop{background:rgba(20,24,30,.45)}
.dhead{display:flex;gap:10px;align-items:flex-start;justify-content:space-between;position:sticky;top:0;background:#fff;
border-bottom:1px solid var(--line);padding:10px 14px;z-index:1}
.dhead h2{margin:0;border:0;font-size:1.1rem;padding:0;overflow-wrap:anywhere}
#d-close{font:inherit;font-size:1.3rem;line-height:1;border:1px solid var(--line);background:#fff;border-radius:6px;width:2.2em;height:2.2em;cursor:pointer;flex:none}
#d-body{padding:6px 14px 14px}
.clause{background:#f6f8fa;border-left:4px solid #8a94a6;padding:6px 10px;margin:8px 0;border-radius:0 6px 6px 0}
.rec{border-top:1px solid var(--line);padding:8px 0}
.rec .hd{display:flex;flex-wrap:wrap;gap:4px 10px;align-items:baseline}
.tag{display:inline-block;border-radius:4px;padding:0 6px;font-weight:700;font-size:.8rem}
.msg{white-space:pre-wrap;overflow-wrap:anywhere;margin:6px 0}
.hidden{display:none!important}
table.head td,table.head th{padding:4px 8px;text-align:left}table.head td.n{text-align:right}
.lib{border:1px solid var(--line);border-radius:8px;padding:4px 12px 10px;margin:12px 0}
.lib h3{margin-top:8px}.lib ul.fl{list-style:none;padding:0;margin:6px 0}
.lib ul.fl li{padding:4px 0;border-top:1px solid var(--line)}
a.fv{display:inline-block;border-radius:4px;padding:0 6px;margin:0 4px 2px 0;font-weight:700;text-decoration:none}
.fold{color:var(--muted);font-size:.9rem;margin:2px 0}.up{font-size:.85rem;color:#0b4d8a}
@media (max-width:600px){
 body{font-size:14px}
 header,main,#filters,#banner,.legend,.top{padding-left:10px;padding-right:10px}
 header h1{font-size:1.2rem}
 #filters{gap:6px 10px;position:static}
 #filters label{flex:1 1 100%;justify-content:space-between}
 #filters select{flex:1;max-width:none}
 #filters label.chk{justify-content:flex-start}
 button.c{min-width:2.3em;min-height:2.1em}
 th.rowh{padding:3px 5px;max-width:8.5em}
 dialog{width:100vw;max-width:100vw;max-height:100vh;height:100vh;margin:0;border-radius:0}
}
"""

_JS = r"""
(function(){
"use strict";
var D=JSON.parse(document.getElementById("data").textContent);
var SHORT={pass:"\u2713",warn:"W",unsupported:"U",skip:"S",fail:"F",timeout:"T",crash:"C",error:"E"};
var WORD={pass:"pass",warn:"warn",unsupported:"unsupported",skip:"skip",fail:"FAIL",timeout:"TIMEOUT",crash:"CRASH",error:"ERROR (dlconform)"};
var FAILING={};D.failures_filter.forEach(function(v){FAILING[v]=1;});
var $=function(id){return document.getElementById(id);};
function esc(s){return String(s==null?"":s).replace(/[&<>"']/g,function(c){return {"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c];});}
function S(i){return D.strings[i]||"";}
function shortGit(g){g=String(g||"");return g.slice(0,12)+(/-dirty$/.test(g)&&g.length>12?"-dirty":"");}
var state={lib:"",group:"",device:"",fail:false,open:""};
var cols=D.columns,rows=D.rows,cells=D.cells;
var at={};for(var k=0;k<D.n_matrix_cells;k++){at[cells[k][0]+","+cells[k][1]]=k;}
function colTitle(c){return c.lib+" "+c.version;}
function isBad(k){var c=cells[k];return !!(FAILING[c[2]]||c[6]);}
function cellLabel(k,where){var c=cells[k];var t=where+": "+WORD[c[2]];
 if(k>=D.n_matrix_cells&&c[8])t+=", "+(c[9]?c[9]+" failed":c[10]+" warned")+" of "+c[8]+" checked";
 else if(c[3]>1)t+=", "+(c[3]-c[4])+" of "+c[3]+" results not passing";if(c[6])t+=", sources disagree";return t;}
function btn(k,where){var c=cells[k];var txt=SHORT[c[2]]||"?";
 if(k>=D.n_matrix_cells&&c[8])txt=(c[9]||c[10])+"/"+c[8];  /* interop: failures (else warns) over checked */
 else if(c[2]!=="pass"&&c[3]>1&&c[3]-c[4]>1)txt+="<small>"+(c[3]-c[4])+"</small>";
 if(c[6])txt+="\u2260";
 return '<button type="button" class="c v-'+c[2]+(c[6]?" cf":"")+'" data-k="'+k+'" aria-label="'+esc(cellLabel(k,where))+'" title="'+esc(cellLabel(k,where))+'" aria-haspopup="dialog">'+txt+"</button>";}
function lvl(l){return l?'<span class="lvl '+esc(l)+'">'+esc(l)+"</span>":"";}
function libOk(name){return !state.lib||name===state.lib;}
function devOk(c){return !state.device||cols[c].device===state.device;}
function colOk(c){return libOk(cols[c].lib)&&devOk(c);}
function groupOk(g){return !state.group||g===state.group;}
function labLib(label){var i=label.indexOf(" ");return i<0?label:label.slice(0,i);}

/* ---------- header, banner, filters */
function tiersOf(){var t=[];D.sources.forEach(function(s){if(t.indexOf(s.tier)<0)t.push(s.tier);});return t;}
$("meta").innerHTML="Generated "+esc(D.generated)+" &middot; "+D.n_results.toLocaleString("en")+" results from "+D.sources.length+
 " runs (tiers: "+esc(tiersOf().join(", "))+") &middot; "+D.n_conflicts+" conflicts, "+D.n_duplicates+" duplicates &middot; schema dlconform-matrix/1";
(function(){var h="";
 D.failures.forEach(function(f){h+='<div class="box bad" role="alert"><strong>'+esc(f.tier)+"</strong> ("+esc(f.machine||"")+") failed at "+esc(f.stage)+
  ", exit status "+esc(f.exit_status)+": "+esc(f.message)+(f.log?"<details><summary>log tail</summary><pre>"+esc(f.log)+"</pre></details>":"")+"</div>";});
 if(D.errors.length){h+='<div class="box note"><strong>Rejected inputs</strong> (nothing merged from them):<ul>';
  D.errors.forEach(function(e){h+="<li><code>"+esc(e.file)+"</code>: "+(e.field?"field <code>"+esc(e.field)+"</code>: ":"")+esc(e.message)+"</li>";});h+="</ul></div>";}
 $("banner").innerHTML=h;})();
(function(){var libs=[];cols.forEach(function(c){if(libs.indexOf(c.lib)<0)libs.push(c.lib);});
 D.interop.forEach(function(t){t.producers.concat(t.consumers).forEach(function(l){l=labLib(l);if(libs.indexOf(l)<0)libs.push(l);});});
 $("f-lib").innerHTML='<option value="">all libraries</option>'+libs.map(function(l){return '<option value="'+esc(l)+'">'+esc(l)+"</option>";}).join("");
 $("f-device").innerHTML='<option value="">all devices</option>'+D.devices.map(function(d){return '<option value="'+esc(d)+'">'+esc(d)+"</option>";}).join("");
 $("f-group").innerHTML='<option value="">all groups</option>'+D.groups.map(function(g){return '<option value="'+esc(g.id)+'">'+esc(g.id+" \u2013 "+g.title)+"</option>";}).join("");
 $("legend").innerHTML="Verdicts: "+D.verdicts.map(function(v){return '<span><span class="v v-'+v+'">'+SHORT[v]+"</span> "+v+"</span>";}).join(" ")+
  ' <span><span class="v" style="border:1px dashed #777">\u2260</span> sources disagree</span> <span>small number: results not passing</span>';})();

/* ---------- headline and findings per library */
var anchorCell={};D.cell_anchors.forEach(function(a,k){if(a)anchorCell[a]=k;});
D.findings.forEach(function(f){anchorCell[f.anchor]=at[f.col+","+f.row];});
D.interop_findings.forEach(function(f){anchorCell[f.anchor]=f.cell;});
var ORDER=["crash","timeout","fail","warn"];
function ord(v){var i=ORDER.indexOf(v);return i<0?9:i;}
function slugLib(l){return "lib-"+l.replace(/[^A-Za-z0-9._-]+/g,"-");}
function must(h,role){var m=h.must[role];return m[1]?m[0]+"/"+m[1]:"\u2013";}
function robust(h){return h.robustness===null?"not graded":h.robustness+" crashes";}
function counts(h){var ks=Object.keys(h.counts).sort(function(a,b){return ord(a)-ord(b);});
 return ks.length?ks.map(function(v){return h.counts[v]+" "+v;}).join(", "):"none";}
function upText(u){return u.map(function(x){return /^fixed/.test(x.state)?x.state+" upstream ("+x.ref+")":"reported upstream: "+x.ref+" ("+x.state+")";}).join("; ");}
function renderHeadline(){var h="<div class='scroll'><table class='plain head'><thead><tr><th>library</th><th>version</th><th>tiers</th><th>producer MUST passed</th><th>consumer MUST passed</th><th>robustness</th><th>findings</th></tr></thead><tbody>";
 D.libraries.forEach(function(l){if(!libOk(l.name))return;l.columns.slice().reverse().forEach(function(c){if(!devOk(c))return;var hd=D.headlines[c],col=cols[c];
  h+="<tr><td><a href='#lib="+encodeURIComponent(l.name)+"'>"+esc(l.name)+"</a></td><td>"+esc(col.version)+"</td><td>"+esc(col.tiers.join(", "))+
   "</td><td class='n'>"+must(hd,"producer")+"</td><td class='n'>"+must(hd,"consumer")+"</td><td>"+robust(hd)+"</td><td>"+
   (hd.findings.length?"<a href='#"+slugLib(l.name)+"' class='go'>"+esc(counts(hd))+"</a>":"none")+"</td></tr>";});});
 $("headline-body").innerHTML=h+"</tbody></table></div>";}
function compact(ids){var out=[],run=[];  /* matrix_findings.compact: XAPI-01, -02, -03 -> XAPI-01\u201303 */
 function flush(){if(run.length>2)out.push(run[0][2]+"\u2013"+run[run.length-1][2].split("-").pop());else run.forEach(function(r){out.push(r[2]);});run=[];}
 ids.forEach(function(id){var m=/^(.*-)(\d+)$/.exec(id);if(!m){flush();out.push(id);return;}var k=[m[1],+m[2],id];
  if(run.length&&(run[run.length-1][0]!==k[0]||run[run.length-1][1]+1!==k[1]))flush();run.push(k);});flush();return out;}
function foldLine(what,fold){var gs=Object.keys(fold);if(!gs.length)return "";var n=0;
 var parts=gs.map(function(g){n+=fold[g].length;var t=g;D.groups.forEach(function(x){if(x.id===g)t=x.title;});return esc(t)+" ("+esc(compact(fold[g]).join(", "))+")";});
 return "<p class='fold'>"+n+" clauses "+what+": "+parts.join("; ")+".</p>";}
function renderLibraries(){var h="";
 D.libraries.forEach(function(l){if(!libOk(l.name)||!l.columns.some(devOk))return;
  h+="<div class='lib' id='"+slugLib(l.name)+"'><h3>"+esc(l.name)+"</h3>";
  var groups={},keys=[];
  l.columns.slice().reverse().forEach(function(c){if(!devOk(c))return;var hd=D.headlines[c],col=cols[c];
   h+="<p><strong>"+esc(col.version)+"</strong> <span class='muted'>("+esc(col.tiers.join(", "))+")</span>: MUST passed: producer "+must(hd,"producer")+", consumer "+must(hd,"consumer")+
    "; robustness: "+robust(hd)+"; findings: "+esc(counts(hd))+".</p>"+foldLine("not offered",hd.not_offered)+foldLine("not testable here",hd.not_testable);
   hd.findings.forEach(function(i){var f=D.findings[i];var key=f.role+"|"+f.row;if(!groups[key]){groups[key]=[];keys.push(key);}groups[key].push(f);});});
  keys.sort(function(a,b){var wa=Math.min.apply(null,groups[a].map(function(f){return ord(f.verdict);})),wb=Math.min.apply(null,groups[b].map(function(f){return ord(f.verdict);}));return wa-wb||groups[a][0].row-groups[b][0].row;});
  keys=keys.filter(function(key){var r=rows[groups[key][0].row];return groupOk(r.group);});
  if(!keys.length){h+="<p class='muted'>No findings"+(state.group?" in this clause group":"")+".</p></div>";return;}
  h+="<ul class='fl'>";
  keys.forEach(function(key){var fs=groups[key],r=rows[fs[0].row],ups=[];
   fs.forEach(function(f){f.upstream.forEach(function(u){if(!ups.some(function(x){return x.ref===u.ref;}))ups.push(u);});});
   h+="<li><strong>"+esc(fs[0].role)+" "+esc(r.clause)+"</strong>"+lvl(r.level)+" ";
   fs.forEach(function(f){h+="<a class='fv v-"+f.verdict+"' id='"+esc(f.anchor)+"' href='#open="+encodeURIComponent(f.anchor)+"'>"+esc(WORD[f.verdict]+" "+cols[f.col].version)+"</a>";});
   h+=" <span class='muted'>"+esc(r.text.length>160?r.text.slice(0,157)+"...":r.text)+"</span>"+(ups.length?"<div class='up'>"+esc(upText(ups))+"</div>":"")+"</li>";});
  h+="</ul></div>";});
 $("libs-body").innerHTML=h||"<p class='muted'>Nothing to show with these filters.</p>";}

/* ---------- library x clause */
function renderMatrix(){
 var vc=[];cols.forEach(function(c,i){if(colOk(i))vc.push(i);});
 var h="<thead><tr><th class='rowh' rowspan='2' scope='col'>clause</th>";var libs=[];
 vc.forEach(function(i){var l=cols[i].lib;if(!libs.length||libs[libs.length-1].n!==l)libs.push({n:l,c:0});libs[libs.length-1].c++;});
 libs.forEach(function(l){h+="<th scope='colgroup' colspan='"+l.c+"'>"+esc(l.n)+"</th>";});
 h+="</tr><tr class='sub'>";
 vc.forEach(function(i){var c=cols[i];h+="<th scope='col' title='"+esc("sources "+c.sources.join(", ")+"; machines "+c.machines.join(", "))+"'>"+esc(c.version)+"<br>"+esc(c.tiers.join(" \u00b7 "))+"</th>";});
 h+="</tr></thead><tbody>";var shown=0;
 D.groups.forEach(function(g){if(!groupOk(g.id))return;var body="";
  g.rows.forEach(function(ri){var r=rows[ri],ks=[],any=false,bad=false;
   vc.forEach(function(ci){var k=at[ci+","+ri];ks.push(k);if(k!==undefined){any=true;if(isBad(k))bad=true;}});
   if(state.fail&&!bad)return;if(!any&&(g.id==="*"||state.device))return;  /* a device shows the clauses judged on it */
   body+="<tr><th class='rowh' scope='row' title='"+esc(r.text)+"'>"+esc(r.clause)+lvl(r.level)+"</th>";
   ks.forEach(function(k,j){body+=k===undefined?"<td class='none'><span class='hidden'>no result</span></td>":"<td>"+btn(k,colTitle(cols[vc[j]])+", "+r.clause)+"</td>";});
   body+="</tr>";shown++;});
  if(body)h+="<tr class='grp'><th colspan='"+(vc.length+1)+"' scope='rowgroup'>"+esc(g.id)+" \u2013 "+esc(g.title)+"</th></tr>"+body;});
 h+="</tbody>";
 $("t-matrix").innerHTML=h;
 $("m-empty").classList.toggle("hidden",shown>0&&vc.length>0);
 return shown;}

/* ---------- interop */
function renderInterop(){var h="";
 if(!D.interop.length){$("interop-body").innerHTML="<p class='muted'>No interop results in this data set (interop records carry a <code>peer</code>).</p>";return;}
 D.interop.forEach(function(t){var pat={};t.cells.forEach(function(k){pat[cells[k][1]+","+cells[k][0]]=k;});
  function vis(p,c){var k=pat[p+","+c];if(k===undefined)return undefined;
   if(state.lib&&labLib(t.producers[p])!==state.lib&&labLib(t.consumers[c])!==state.lib)return undefined;return k;}
  var P={},C={},ps=[],cs=[];
  t.producers.forEach(function(_,p){t.consumers.forEach(function(_,c){var k=vis(p,c);if(k!==undefined&&(!state.fail||isBad(k))){P[p]=1;C[c]=1;}});});
  t.producers.forEach(function(_,p){if(P[p])ps.push(p);});t.consumers.forEach(function(_,c){if(C[c])cs.push(c);});
  h+="<h3>"+esc(t.tier)+"</h3>";
  if(!ps.length){h+="<p class='muted'>Nothing to show with these filters.</p>";return;}
  h+="<div class='scroll'><table><thead><tr><th class='rowh' scope='col'>producer \u2193 consumer \u2192</th>";
  cs.forEach(function(c){h+="<th scope='col'>"+esc(t.consumers[c])+"</th>";});h+="</tr></thead><tbody>";
  ps.forEach(function(p){h+="<tr><th class='rowh' scope='row'>"+esc(t.producers[p])+"</th>";
   cs.forEach(function(c){var k=vis(p,c);h+=k===undefined?"<td class='none'></td>":"<td>"+btn(k,t.tier+": "+t.producers[p]+" to "+t.consumers[c])+"</td>";});h+="</tr>";});
  h+="</tbody></table></div>";});
 $("interop-body").innerHTML=h;}

/* ---------- history */
function renderHistory(){var h="";
 D.history.forEach(function(hh){if(!libOk(hh.lib)||!hh.columns.some(devOk))return;var hc=hh.columns;
  h+="<h3>"+esc(hh.lib)+"</h3>";
  if(hc.length<2){h+="<p class='muted'>One version only ("+esc(cols[hc[0]].version)+", "+esc(cols[hc[0]].tiers.join(", "))+"): nothing to compare.</p>";return;}
  h+="<p>"+hh.regressions+" regressions, "+hh.fixes+" fixes; "+hh.unchanged+" clauses unchanged across "+hc.length+" versions.</p>";
  var rs=hh.rows.filter(function(r){var row=rows[r.row];if(!groupOk(row.group))return false;
   return !state.fail||r.cells.some(function(k){return k!==null&&isBad(k);});});
  if(!rs.length){h+=hh.rows.length?"<p class='muted'>No changed clause with these filters.</p>":"";return;}
  h+="<div class='scroll'><table><thead><tr><th class='rowh' scope='col'>clause</th>";
  hc.forEach(function(c){h+="<th scope='col'>"+esc(cols[c].version)+"<br><span class='muted'>"+esc(cols[c].tiers.join(" \u00b7 "))+"</span></th>";});
  h+="</tr></thead><tbody>";
  rs.forEach(function(r){var row=rows[r.row];h+="<tr><th class='rowh' scope='row' title='"+esc(row.text)+"'>"+esc(row.clause)+lvl(row.level)+"</th>";
   r.cells.forEach(function(k,j){var ch=r.changes[j];
    h+=k===null?"<td class='none'></td>":"<td>"+(ch?"<span class='chg "+ch+"'>"+(ch==="regressed"?"\u2193 regressed":"\u2191 fixed")+"</span>":"")+
     btn(k,hh.lib+" "+cols[hc[j]].version+", "+row.clause+(ch?", "+ch:""))+"</td>";});h+="</tr>";});
  h+="</tbody></table></div>";});
 $("history-body").innerHTML=h||"<p class='muted'>Nothing to show with these filters.</p>";}

/* ---------- conflicts and runs (static) */
(function(){var h="";
 if(!D.conflicts.length){h="<p class='muted'>No two sources disagree on the same library version, clause and test. "+D.n_duplicates+" results were seen identically in several sources.</p>";}
 else{h="<div class='scroll'><table class='plain'><thead><tr><th>library</th><th>version</th><th>clause</th><th>test</th><th>verdicts by source</th></tr></thead><tbody>";
  D.conflicts.forEach(function(c){var vs=Object.keys(c[6]).map(function(v){return "<span class='tag v-"+v+"'>"+v+"</span> "+c[6][v].map(function(s){var so=D.sources[s]||{};return esc((so.id||"?")+" ("+(so.tier||"?")+")");}).join(", ");}).join("<br>");
   h+="<tr><td>"+esc(c[0]+(c[5]?" \u2192 "+c[5]:""))+"</td><td>"+esc(c[1])+"</td><td>"+esc(c[2])+"</td><td><code>"+esc(c[3])+"</code></td><td>"+vs+"</td></tr>";});
  h+="</tbody></table></div>";}
 $("conflicts-body").innerHTML=h;
 h="<div class='scroll'><table class='plain'><thead><tr><th>source</th><th>tier</th><th>machine</th><th>Python</th><th>dlpack header</th><th>libraries</th><th>dlconform</th><th>results</th><th>status</th><th>file</th></tr></thead><tbody>";
 D.sources.forEach(function(s){var st=s.status==="ok"?"ran"+(s.exit_status!=null?", exit "+s.exit_status:""):"<strong>"+esc(s.status)+"</strong> at "+esc(s.stage)+": "+esc(s.message);
  var skipped=Object.keys(s.targets||{}).filter(function(t){return s.targets[t].status!=="ran";}).map(function(t){return esc(t)+": "+esc(s.targets[t].status)+(s.targets[t].reason?" ("+esc(s.targets[t].reason)+")":"");});
  h+="<tr><td>"+esc(s.id)+"</td><td>"+esc(s.tier)+"</td><td>"+esc(s.machine+" "+s.arch)+"</td><td>"+esc(s.python)+"</td><td>"+esc(s.header)+(s.header_source?"<br><span class='muted'>"+esc(s.header_source)+"</span>":"")+
   "</td><td>"+Object.keys(s.libraries).map(function(l){return esc(l+" "+s.libraries[l]);}).join("<br>")+"</td><td><code>"+esc(shortGit(s.git))+"</code></td><td>"+s.results+
   "</td><td>"+st+(skipped.length?"<br><span class='muted'>"+skipped.join("<br>")+"</span>":"")+(s.performance?"<br>performance figures attached":"")+"</td><td><code>"+esc(s.file)+"</code><br><span class='muted'>"+esc(s.generated)+"</span></td></tr>";});
 $("sources-body").innerHTML=h+"</tbody></table></div>";})();

/* ---------- drill-down */
var dlg=$("detail"),opener=null;
var rowOf={};rows.forEach(function(r,i){rowOf[r.clause]=i;});
var interopOf={};D.interop.forEach(function(t){t.cells.forEach(function(k){interopOf[k]=t;});});
function srcText(i){var s=D.sources[i];if(!s)return "?";return s.id+": "+s.tier+" on "+s.machine+", Python "+s.python+", header "+s.header+(s.git?", dlconform "+shortGit(s.git):"");}
function openCell(k,from){var c=cells[k],title,clause=null,h="";
 if(k<D.n_matrix_cells){var col=cols[c[0]];clause=rows[c[1]];title=col.lib+" "+col.version+" \u00b7 "+clause.clause;
  h+="<p class='muted'>Tiers "+esc(col.tiers.join(", "))+"; sources "+esc(col.sources.join(", "))+".</p>";}
 else{var t=interopOf[k];title="interop "+t.tier+": "+t.producers[c[1]]+" \u2192 "+t.consumers[c[0]];}
 $("d-title").innerHTML=esc(title)+" <span class='tag v-"+c[2]+"'>"+esc(WORD[c[2]])+"</span>";
 var shown=clause?[clause]:[];
 if(!clause){var seen={};c[5].forEach(function(d){var id=D.details[d][3];if(!seen[id]&&rowOf[id]!==undefined){seen[id]=1;shown.push(rows[rowOf[id]]);}});}
 shown.forEach(function(cl){var gt="";D.groups.forEach(function(g){if(g.id===cl.group)gt=g.title;});
  h+="<div class='clause'><strong>"+esc(cl.clause)+"</strong>"+lvl(cl.level)+" <span class='muted'>"+esc(gt)+(cl.binds?", binds "+esc(cl.binds):"")+(cl.source?", "+esc(cl.source):"")+"</span>"+
   "<p class='msg'>"+esc(cl.text||"(no clause text)")+"</p>"+(cl.reading?"<p class='msg'><em>Reading taken:</em> "+esc(cl.reading)+"</p>":"")+"</div>";});
 h+="<p>"+(c[3]-c[4])+" of "+c[3]+" results did not pass"+(c[6]?"; <strong>sources disagree</strong>: some of these results differ from another run of the same versions (see Conflicts)":"")+". Results from: "+
  c[7].map(function(s){var so=D.sources[s]||{};return esc((so.id||"?")+" ("+(so.tier||"?")+", "+(so.machine||"?")+")");}).join(", ")+".</p>";
 if(!c[5].length)h+="<p>Every result in this cell passed.</p>";
 var groups=[],byKey={};
 c[5].forEach(function(d){var x=D.details[d];var key=[x[6],x[3],x[4],x[5],x[7],x[8],x[9],x[10]].join("|");
  if(byKey[key])byKey[key].push(x[0]);else{byKey[key]=[x[0]];groups.push([x,byKey[key]]);}});
 var RANK={};D.verdicts.forEach(function(v,i){RANK[v]=i;});
 groups.sort(function(a,b){return RANK[b[0][6]]-RANK[a[0][6]];});
 groups.forEach(function(gx){var x=gx[0],v=x[6],srcs=gx[1];
  h+="<div class='rec'><div class='hd'><span class='tag v-"+v+"'>"+esc(WORD[v])+"</span><code>"+esc(x[4])+"</code>"+(k>=D.n_matrix_cells?"<span>"+esc(x[3])+"</span>":"")+
   "<span class='muted'>"+esc(x[5])+(x[10]?" with "+esc(x[10]):"")+"</span></div><div class='muted'>"+srcs.map(function(s){return esc(srcText(s));}).join("<br>")+"</div>";
  h+="<p class='msg'>"+(S(x[7])?esc(S(x[7])):"<span class='muted'>(no message)</span>")+"</p>";
  if(S(x[8]))h+="<div><strong>Reproducer</strong> <span class='muted'>(PYTHONPATH=harness python3 -c \"$repro\")</span><pre tabindex='0' aria-label='reproducer'><code>"+esc(S(x[8]))+"</code></pre></div>";
  if(S(x[9]))h+="<details><summary>evidence</summary><pre>"+esc(S(x[9]))+"</pre></details>";
  h+="</div>";});
 $("d-body").innerHTML=h;opener=from||null;
 if(!state.open||anchorCell[state.open]!==k){state.open=D.cell_anchors[k]||"";writeHash();}
 if(typeof dlg.showModal==="function"){dlg.showModal();}else{dlg.setAttribute("open","");}
 $("d-close").focus();}
dlg.addEventListener("close",function(){state.open="";writeHash();if(opener&&document.body.contains(opener))opener.focus();});
$("d-close").addEventListener("click",function(){dlg.close();});
dlg.addEventListener("click",function(e){if(e.target===dlg)dlg.close();});
document.addEventListener("keydown",function(e){if(e.key==="Escape"&&dlg.open){e.preventDefault();dlg.close();}});
document.addEventListener("click",function(e){var b=e.target.closest&&e.target.closest("button.c");if(b)openCell(+b.getAttribute("data-k"),b);});
/* arrow keys move between cells of a table */
document.addEventListener("keydown",function(e){var b=e.target;if(!b.classList||!b.classList.contains("c"))return;
 var dir={ArrowLeft:[0,-1],ArrowRight:[0,1],ArrowUp:[-1,0],ArrowDown:[1,0]}[e.key];if(!dir)return;
 var td=b.parentElement,tr=td.parentElement,idx=td.cellIndex,next=null;
 if(dir[1]){var cs=tr.cells;for(var i=idx+dir[1];i>=0&&i<cs.length;i+=dir[1]){next=cs[i].querySelector("button.c");if(next)break;}}
 else{var rs=tr.parentElement.rows,ri=tr.sectionRowIndex;for(var j=ri+dir[0];j>=0&&j<rs.length;j+=dir[0]){var cc=rs[j].cells[idx];
  if(cc&&rs[j].cells.length===tr.cells.length){next=cc.querySelector("button.c");if(next)break;}}}
 if(next){e.preventDefault();next.focus();}});

/* ---------- filters and the URL hash */
function writeHash(){var p=[];if(state.lib)p.push("lib="+encodeURIComponent(state.lib));if(state.group)p.push("group="+encodeURIComponent(state.group));
 if(state.device)p.push("device="+encodeURIComponent(state.device));
 if(state.fail)p.push("fail=1");if(state.open)p.push("open="+encodeURIComponent(state.open));
 var h=p.length?"#"+p.join("&"):"";if(location.hash!==h)history.replaceState(null,"",h||location.pathname+location.search);}
function readHash(){var raw=location.hash.replace(/^#/,""),s={lib:"",group:"",device:"",fail:false,open:""};
 if(raw&&raw.indexOf("=")<0){try{s.open=decodeURIComponent(raw);}catch(e){}return s;}
 raw.split("&").forEach(function(kv){var i=kv.indexOf("=");if(i<0)return;var k=kv.slice(0,i),v;try{v=decodeURIComponent(kv.slice(i+1));}catch(e){return;}
  if(k==="lib"||k==="group"||k==="device"||k==="open")s[k]=v;else if(k==="fail")s.fail=v==="1";});return s;}
function hasOption(sel,v){return Array.prototype.some.call(sel.options,function(o){return o.value===v;});}
function render(){var n=renderMatrix();renderInterop();renderHistory();renderHeadline();renderLibraries();
 $("f-count").textContent=n+" clause rows shown";
 document.body.setAttribute("data-filter",[state.lib,state.group,state.device,state.fail?"fail":""].join("|"));}
function apply(){state.lib=$("f-lib").value;state.group=$("f-group").value;state.device=$("f-device").value;state.fail=$("f-fail").checked;render();writeHash();}
function fromHash(){var s=readHash();
 $("f-lib").value=hasOption($("f-lib"),s.lib)?s.lib:"";$("f-group").value=hasOption($("f-group"),s.group)?s.group:"";$("f-device").value=hasOption($("f-device"),s.device)?s.device:"";$("f-fail").checked=s.fail;
 state.lib=$("f-lib").value;state.group=$("f-group").value;state.device=$("f-device").value;state.fail=s.fail;state.open=s.open;render();
 var k=anchorCell[s.open];
 if(k!==undefined){var b=document.querySelector("button.c[data-k='"+k+"']");openCell(k,b||document.getElementById(s.open));}
 else if(dlg.open){dlg.close();}
 else if(s.open){var el=document.getElementById(s.open);if(el)el.scrollIntoView();}}
["f-lib","f-group","f-device","f-fail"].forEach(function(id){$(id).addEventListener("change",apply);});
window.addEventListener("hashchange",fromHash);
fromHash();
document.body.setAttribute("data-ready","1");
})();
"""

_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="@@CSP@@">
<title>@@TITLE@@</title>
<style>@@CSS@@</style>
</head>
<body>
<header><h1>@@TITLE@@</h1><p id="meta"></p></header>
<div id="banner"></div>
<section aria-labelledby="h-headline" class="top"><h2 id="h-headline">Headline</h2>
<p class="muted">Per library version: the MUST clauses passed of those checked, per role; crashes on invalid input (robustness); the findings, which link to the library's section.</p><div id="headline-body"></div></section>
<form id="filters" role="search" aria-label="Filters" onsubmit="return false">
<label for="f-lib">Library <select id="f-lib"></select></label>
<label for="f-group">Clause group <select id="f-group"></select></label>
<label for="f-device">Device <select id="f-device"></select></label>
<label class="chk" for="f-fail"><input type="checkbox" id="f-fail"> Failures only</label>
<span id="f-count" aria-live="polite"></span>
</form>
<div class="legend" id="legend"></div>
<main>
<section aria-labelledby="h-libs"><h2 id="h-libs">Findings by library</h2>
<p class="muted">Fail, crash, timeout and warn, per role and clause; each version opens its evidence and reproducer. Clauses a version does not offer or that cannot be tested here are folded into one line.</p><div id="libs-body"></div></section>
<section aria-labelledby="h-matrix"><h2 id="h-matrix">Library &times; clause</h2>
<p class="muted">Columns are library versions (with the tiers they ran in); rows are spec clauses by group, with their level. Each cell is the worst verdict of its results; open it for the evidence. Arrow keys move between cells.</p>
<div class="scroll"><table id="t-matrix"></table></div><p id="m-empty" class="muted hidden">Nothing to show with these filters.</p></section>
<section aria-labelledby="h-interop"><h2 id="h-interop">Producer &times; consumer interop</h2><div id="interop-body"></div></section>
<section aria-labelledby="h-history"><h2 id="h-history">Version history</h2>
<p class="muted">Per library, versions oldest first; only the clauses whose verdict changes between versions.</p><div id="history-body"></div></section>
<section aria-labelledby="h-conflicts"><h2 id="h-conflicts">Conflicts</h2><div id="conflicts-body"></div></section>
<section aria-labelledby="h-sources"><h2 id="h-sources">Runs and provenance</h2><div id="sources-body"></div></section>
</main>
<dialog id="detail" aria-labelledby="d-title"><div class="dhead"><h2 id="d-title"></h2><button type="button" id="d-close" aria-label="Close">&times;</button></div><div id="d-body"></div></dialog>
<script type="application/json" id="data">@@DATA@@</script>
<script>@@JS@@</script>
</body>
</html>
"""
