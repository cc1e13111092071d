"""The HTML report of module timing: one self-contained file (inline CSS and script, no network
at view time) with an icicle view of each context's module tree (width = p50, or self time),
hover details, click to zoom, a search box, and the table below (Note [HTML report])."""

from __future__ import annotations

import html
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Union

from .._native import write_text_file
from ._table import (Replays, Tree, by_context, context_name, graph_replays, rows_of,
                     sampling_note, section_header)

# Note [HTML report]: the page is generated from the same rows as the text table (Note
# [Reading tables] in _table.py), embedded as JSON; its script draws everything from them:
#
# - per context an icicle (top-down flame graph): a node per region, its width its p50 (or,
#   with "width: self", its self p50 plus its children's widths), children laid left to right
#   in module order inside their parent and scaled down when their p50s add up to more than
#   the parent's (p50s do not add exactly); depth down the page. Nodes are absolutely placed
#   divs, made once; a zoom only moves them (left/width in percent) and hides those outside
#   the zoomed node, so at 5,000 regions a click costs one pass over the nodes, not a rebuild.
#   Nodes narrower than a pixel are hidden, and a zoom writes only what changes. The tables
#   below use a fixed layout and content-visibility:auto: a 5,000-row table laid out at load
#   cost more than everything else (1.4 s of 1.8 in headless Chromium on a loaded 2-core
#   machine; with both, the page draws in about 0.7 s there and a zoom takes 0.1-0.3 s).
# - hover: a tooltip with path, class (the region's "module" metadata where the run had it),
#   count, p50, p95, self p50 and share; click: zoom to the node (its ancestors span the
#   width); click the context's header or press Escape: zoom out.
# - search: the box (and ?q=... or #q=... in the URL, for links and the browser test) marks the
#   nodes and table rows whose path holds the text (case-insensitive) and dims the rest; the
#   count of matches is shown. ?zoom=PATH zooms to that region at load (for links and the
#   browser test: body[data-zoom-ms] says what the zoom took).
# - the table below: the text table's columns, one section per context, tree-indented.
# - body[data-ready] is set when everything is drawn, with data-render-ms (what drawing took,
#   for the responsiveness test).

STYLE = """
*{box-sizing:border-box}body{font:13px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;
margin:0;color:#1d232a;background:#fafafa}header{padding:10px 16px;background:#20303f;
color:#fff;display:flex;gap:16px;align-items:center;flex-wrap:wrap}header h1{font-size:16px;
margin:0;font-weight:600}header input[type=search]{font:inherit;padding:4px 8px;width:260px;border-radius:4px;
border:1px solid #8aa}header label{font-size:12px}#matches{font-size:12px;opacity:.85}
main{padding:8px 16px}section{margin:10px 0 18px}h2{font-size:14px;margin:6px 0;
cursor:pointer}h2 small{font-weight:400;color:#566}.flame{position:relative;background:#fff;
border:1px solid #dde;overflow:hidden}.node{position:absolute;height:17px;overflow:hidden;
white-space:nowrap;text-overflow:ellipsis;font-size:11px;line-height:17px;padding:0 3px;
border-right:1px solid #fff;border-bottom:1px solid #fff;cursor:pointer;color:#1d1d1d}
.node:hover{outline:1px solid #000;z-index:2}.dim .node{opacity:.35}.dim .node.match{opacity:1}
.node.match{background:#6a5acd !important;color:#fff}#tip{position:fixed;pointer-events:none;
background:#20303f;color:#fff;padding:6px 8px;border-radius:4px;font-size:12px;display:none;
z-index:10;max-width:520px;white-space:pre}table{border-collapse:collapse;background:#fff;
font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace;margin-top:6px}
th,td{padding:1px 8px;border-bottom:1px solid #eef}th{text-align:right;background:#eef1f5}
th:first-child,td:first-child{text-align:left}td{text-align:right}tr.match td{background:#e6e1ff}
.dimrows tr.row:not(.match){opacity:.45}
#tables section{content-visibility:auto;contain-intrinsic-size:auto 1200px}
table.modules{table-layout:fixed;width:720px}table.modules th:first-child{width:340px}
table.modules td:first-child{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
"""

SCRIPT = r"""
(function(){
"use strict";
const t0=performance.now();
const DATA=JSON.parse(document.getElementById("data").textContent);
const ROW=18;
// As _table.py's us() and fixed(): half away from zero, the same double operations.
function fixed(v,d){const k=Math.pow(10,d);return (Math.floor(v*k+0.5)/k).toFixed(d);}
function us(ns){const v=ns/1000;if(v>=1e7)return v.toExponential(2).replace("e+","e");
if(v>=1000)return fixed(v,0);if(v>=10)return fixed(v,1);return fixed(v,2);}
function share(v,t){return t>0?fixed(100*v/t,1)+"%":"0.0%";}
const tip=document.getElementById("tip");
const views=[];
let mode="p50";
function layout(ctx){
  const n=ctx.rows.length;const kids=ctx.kids;const w=new Float64Array(n);
  // widths bottom-up (children come after their parent in the rows)
  for(let i=n-1;i>=0;i--){const r=ctx.rows[i];
    if(mode==="p50")w[i]=r.p50;else{let s=r.self;for(const k of kids[i])s+=w[k];w[i]=s;}}
  const x=new Float64Array(n),ww=new Float64Array(n);
  let total=0;for(const r of ctx.roots)total+=w[r];
  const place=(list,start,span)=>{let sum=0;for(const k of list)sum+=w[k];
    const scale=sum>span&&sum>0?span/sum:1;let at=start;
    for(const k of list){x[k]=at;ww[k]=w[k]*scale;at+=ww[k];place(kids[k],x[k],ww[k]);}};
  place(ctx.roots,0,total);
  for(let i=0;i<n;i++){x[i]=total>0?x[i]/total:0;ww[i]=total>0?ww[i]/total:0;}
  ctx.x=x;ctx.w=ww;
}
function draw(ctx,zoom){
  const el=ctx.flame;const px=el.clientWidth||1000;
  let x0=0,span=1;const anc=new Set();
  if(zoom>=0){x0=ctx.x[zoom];span=ctx.w[zoom]||1e-12;let p=ctx.rows[zoom].parent;
    while(p>=0){anc.add(p);p=ctx.rows[p].parent;}}
  let maxDepth=0;
  for(let i=0;i<ctx.rows.length;i++){const node=ctx.nodes[i];let l,wd;
    if(anc.has(i)){l=0;wd=1;}else{l=(ctx.x[i]-x0)/span;wd=ctx.w[i]/span;}
    const visible=wd*px>=1&&l<1&&l+wd>0&&(zoom<0||anc.has(i)||isUnder(ctx,i,zoom));
    // Only what changes is written: a zoom leaves most hidden nodes untouched.
    if(!visible){if(node._shown!==false){node.style.display="none";node._shown=false;}continue;}
    if(node._shown!==true){node.style.display="";node._shown=true;}
    node.style.left=(Math.max(l,0)*100)+"%";
    node.style.width=((Math.min(l+wd,1)-Math.max(l,0))*100)+"%";
    if(ctx.rows[i].depth>maxDepth)maxDepth=ctx.rows[i].depth;}
  el.style.height=((maxDepth-ctx.base+1)*ROW+2)+"px";ctx.zoom=zoom;
}
function isUnder(ctx,i,z){let p=i;while(p>=0){if(p===z)return true;p=ctx.rows[p].parent;}return false;}
function esc(s){return String(s).replace(/&/g,"&amp;").replace(/</g,"&lt;").replace(/>/g,"&gt;")
  .replace(/"/g,"&quot;");}
function hue(s){let h=0;for(let i=0;i<s.length;i++)h=(h*31+s.charCodeAt(i))>>>0;return h;}
function color(r){const h=hue(r.cls||r.name);return "hsl("+(10+h%45)+","+(55+h%30)+"%,"+(62+h%14)+"%)";}
function build(ctx,section){
  const n=ctx.rows.length;ctx.kids=[];for(let i=0;i<n;i++)ctx.kids.push([]);ctx.roots=[];
  ctx.base=1e9;
  for(let i=0;i<n;i++){const p=ctx.rows[i].parent;if(p>=0)ctx.kids[p].push(i);else ctx.roots.push(i);
    ctx.base=Math.min(ctx.base,ctx.rows[i].depth);}
  const h=document.createElement("h2");h.textContent=ctx.name+" ";
  const sm=document.createElement("small");sm.textContent=ctx.header+" (click a box to zoom; here or Esc: zoom out)";
  h.appendChild(sm);section.appendChild(h);
  const flame=document.createElement("div");flame.className="flame";ctx.flame=flame;
  // One string, parsed once: at 5,000 regions far cheaper than 5,000 createElement calls.
  const parts=[];
  for(let i=0;i<n;i++){const r=ctx.rows[i];
    parts.push('<div class="node" data-i="',i,'" data-path="',esc(r.path),'" style="top:',
      (r.depth-ctx.base)*ROW,'px;background:',color(r),'">',esc(r.name),'</div>');}
  flame.innerHTML=parts.join("");ctx.nodes=Array.from(flame.children);
  section.appendChild(flame);
  flame.addEventListener("click",e=>{const t=e.target.closest(".node");if(!t)return;
    const i=+t.dataset.i;draw(ctx,ctx.zoom===i?ctx.rows[i].parent:i);});
  flame.addEventListener("mousemove",e=>{const t=e.target.closest(".node");if(!t){tip.style.display="none";return;}
    const r=ctx.rows[+t.dataset.i];
    tip.textContent=r.path+"\n"+(r.cls?"class "+r.cls+"\n":"")+"count "+r.count+"   p50 "+us(r.p50)+
      " us   p95 "+us(r.p95)+" us\nself p50 "+us(r.self)+" us ("+share(r.self,ctx.total)+
      ")   share "+share(r.p50,ctx.total);
    tip.style.display="block";tip.style.left=Math.min(e.clientX+12,innerWidth-540)+"px";
    tip.style.top=(e.clientY+14)+"px";});
  flame.addEventListener("mouseleave",()=>{tip.style.display="none";});
  h.addEventListener("click",()=>draw(ctx,-1));
  layout(ctx);
}
function table(ctx,section){
  const t=document.createElement("table");t.className="modules";t.dataset.context=ctx.name;
  const parts=["<tr>"];
  for(const c of ["module","count","p50 us","p95 us","self p50","self %"])parts.push("<th>",c,"</th>");
  parts.push("</tr>");
  const order=[];const walk=l=>{for(const k of l){order.push(k);walk(ctx.kids[k]);}};walk(ctx.roots);
  for(const i of order){const r=ctx.rows[i];
    parts.push('<tr class="row" data-path="',esc(r.path),'"><td>',"&nbsp;&nbsp;".repeat(r.depth-ctx.base),
      esc(r.name),"</td><td>",r.count,"</td><td>",us(r.p50),"</td><td>",us(r.p95),"</td><td>",
      us(r.self),"</td><td>",share(r.self,ctx.total),"</td></tr>");}
  t.innerHTML=parts.join("");ctx.trs=Array.from(t.querySelectorAll("tr.row"));
  section.appendChild(t);
}
function search(q){q=(q||"").toLowerCase();let count=0;
  for(const ctx of views){let any=false;
    for(let i=0;i<ctx.rows.length;i++){const m=q!==""&&ctx.rows[i].path.toLowerCase().includes(q);
      ctx.nodes[i].classList.toggle("match",m);if(m){count++;any=true;}}
    for(const tr of ctx.trs){tr.classList.toggle("match",q!==""&&tr.dataset.path.toLowerCase().includes(q));}
    ctx.flame.classList.toggle("dim",q!=="");ctx.tableEl.classList.toggle("dimrows",q!=="");}
  document.getElementById("matches").textContent=q?count+" match"+(count===1?"":"es"):"";
  return count;}
const main=document.querySelector("main");const below=document.getElementById("tables");
for(const ctx of DATA.contexts){const s=document.createElement("section");s.className="context";
  s.dataset.context=ctx.name;build(ctx,s);main.insertBefore(s,below);views.push(ctx);}
for(const ctx of views){const s=document.createElement("section");
  const h=document.createElement("h2");h.textContent=ctx.name;s.appendChild(h);
  table(ctx,s);ctx.tableEl=s.querySelector("table");below.appendChild(s);}
for(const ctx of views)draw(ctx,-1);
const box=document.getElementById("q");
box.addEventListener("input",()=>search(box.value));
document.getElementById("self").addEventListener("change",e=>{mode=e.target.checked?"self":"p50";
  for(const ctx of views){layout(ctx);draw(ctx,-1);}});
addEventListener("keydown",e=>{if(e.key==="Escape")for(const ctx of views)draw(ctx,-1);});
addEventListener("resize",()=>{for(const ctx of views)draw(ctx,ctx.zoom);});
const params=new URLSearchParams(location.search);
let q=params.get("q");
if(q===null&&location.hash.startsWith("#q="))q=decodeURIComponent(location.hash.slice(3));
if(q){box.value=q;search(q);}
const z=params.get("zoom");
if(z){const t1=performance.now();
  for(const ctx of views){const i=ctx.rows.findIndex(r=>r.path===z);if(i>=0)draw(ctx,i);}
  document.body.dataset.zoomMs=(performance.now()-t1).toFixed(1);}
document.body.dataset.renderMs=(performance.now()-t0).toFixed(1);
document.body.dataset.ready="1";
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{style}</style></head>
<body><header><h1>{title}</h1>
<input id="q" type="search" placeholder="search modules (e.g. attn)" aria-label="search">
<span id="matches"></span>
<label><input id="self" type="checkbox"> width: self time</label></header>
<main><div id="tables"><h2 class="tables">Per module (microseconds)</h2></div></main>
<div id="tip"></div>
<script type="application/json" id="data">{data}</script>
<script>{script}</script></body></html>
"""


def report_data(rows: List[Dict[str, Any]], *, labels: Optional[Mapping[int, str]] = None,
                classes: Optional[Mapping[str, str]] = None,
                replays: Optional[Replays] = None) -> Dict[str, Any]:
    """What the page draws: per context its name, header line (with the graph's replays run
    and timed, `replays` as graph_replays() gives them: Note [Reading tables]), time and rows
    (path, name, depth, parent index, count, p50, p95, self p50 in ns, class)."""
    if replays is None:
        replays = graph_replays(rows, rows)
    contexts = []
    for context, group in by_context(rows).items():
        tree = Tree(group)
        name = context_name(context, labels)
        # Parents before children (the script lays out bottom-up over the indices).
        order: List[int] = []

        def walk(indices: List[int]) -> None:
            for i in indices:
                order.append(i)
                walk(tree.children[i])

        walk(tree.roots)
        position = {old: new for new, old in enumerate(order)}
        out = []
        for old in order:
            r = tree.rows[old]
            parent = tree.parent[old]
            out.append({"path": r["path"], "name": tree.name(old), "depth": int(r.get("depth", 0)),
                        "parent": position[parent] if parent >= 0 else -1,
                        "count": int(r["count"]), "p50": float(r["p50_ns"]),
                        "p95": float(r["p95_ns"]), "self": float(r["self_p50_ns"]),
                        "cls": (classes or {}).get(r["path"], "")})
        graph = replays.get(context[0]) if context[0] else None
        header = section_header(tree, name, graph).split(": ", 1)[-1]
        note = sampling_note(graph)
        contexts.append({"name": name, "header": header + (f"; {note}" if note else ""),
                         "total": tree.total_ns, "rows": out})
    return {"contexts": contexts}


def classes_of(profiler: Any) -> Dict[str, str]:
    """Region path -> its "module" metadata (the module's class), from the kept reports."""
    classes: Dict[str, str] = {}
    try:
        reports = profiler.reports()
    except Exception:  # noqa: BLE001 - classes are an extra; a profiler without reports has none
        return classes
    seen = set()
    for report in reports:
        for region in report.regions:
            if region.path in seen:
                continue
            seen.add(region.path)
            module = dict(region.metadata).get("module")
            if module:
                classes[region.path] = str(module)
    return classes


def html_report(source: Any, *, labels: Optional[Mapping[int, str]] = None,
                classes: Optional[Mapping[str, str]] = None,
                title: str = "accgraph module timing") -> str:
    """The HTML report of `source` (a Profiler, a stats CSV path or rows) as a string."""
    if classes is None and hasattr(source, "reports"):
        classes = classes_of(source)
    rows = rows_of(source)
    data = report_data(rows, labels=labels, classes=classes,
                       replays=graph_replays(source, rows))
    # "</" cannot end the JSON's script element early.
    text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return PAGE.format(title=html.escape(title), style=STYLE, data=text, script=SCRIPT)


def write_html(source: Any, path: Union[str, "os.PathLike[str]"], *,
               labels: Optional[Mapping[int, str]] = None,
               classes: Optional[Mapping[str, str]] = None,
               title: str = "accgraph module timing") -> None:
    """Writes the HTML report of `source` (a Profiler, a stats CSV path or rows) to `path`:
    one self-contained file (Note [HTML report]); replaced only once complete; OSError with
    the system's reason."""
    write_text_file(os.fspath(path), "the HTML report",
                     html_report(source, labels=labels, classes=classes, title=title))
