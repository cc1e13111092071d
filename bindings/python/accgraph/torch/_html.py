"""The HTML reports of region timing: one self-contained file (inline CSS and script, no network
at view time) with an icicle view of each context's tree (width = p50, or self time), hover
details, click to zoom, a search box, the table and the inverted (self time) view; for one run
(:func:`write_html`) or two (:func:`compare` with ``html=``: B's icicle coloured by compare's
verdicts against A). Note [HTML report]."""

from __future__ import annotations

import html
import json
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from .._errors import InvalidArgumentError, make_error
from .._native import write_text_file
from ._compare import Comparison, verdict
from ._compare import compare as compare_runs
from ._table import (HOW, Replays, Row, Tree, by_context, context_name, graph_replays,
                     replays_text, rows_of, sampling_note, section_header, us)

# Note [HTML report]: the page is generated from the same rows as the text table (Note
# [Reading tables] in _table.py), embedded as JSON; its script draws everything from them:
#
# - per context an icicle (top-down flame graph): a node per region, its width its p50 (or,
#   with "width: self", its self p50 plus its children's widths), children laid left to right
#   in tree order inside their parent and scaled down when their p50s add up to more than
#   the parent's (p50s do not add exactly); depth down the page. The rows come parents first
#   (pre-order), so layout, subtree tests and the table are single passes over the indices,
#   without recursion (a recursive module 1,000 levels deep draws like a flat one). Nodes are
#   absolutely placed divs, made once; a zoom only moves them (left/width in percent) and
#   hides those outside the zoomed node, so at 5,000 regions a click costs one pass over the
#   nodes, not a rebuild. Nodes narrower than a pixel are hidden, and a zoom writes only what
#   changes. A node too narrow for its label shows none and gets the path as hover text
#   (title). The tables use a fixed layout and content-visibility:auto: a 5,000-row table
#   laid out at load cost more than everything else (1.4 s of 1.8 in headless Chromium on a
#   loaded 2-core machine; with both, the page draws in about 0.7 s there and a zoom takes
#   0.1-0.3 s).
# - colours: one run's nodes take a palette colour by their class (or name), never the colour
#   of their parent or of the sibling before them, so neighbours differ. Two runs' (the
#   differential view, of B against A): the colour says compare's verdict for the row (Note
#   [Comparing runs] in _compare.py), one hue for slower, one for faster (deeper with the
#   ratio), grey within the noise and for rows with too few samples to judge, amber for a
#   region only in B (new, "+"), striped grey for one only in A (gone, "-", drawn at A's
#   width under its parent in B). The page applies no rule of its own: each row carries the
#   verdict compare gave it.
# - hover: a tooltip with path, class (the region's "module" metadata where the run had it),
#   count, p50, p95, self p50 and share (both runs' and the verdict in the differential
#   view); click: zoom to the node (its ancestors span the width); click the context's header
#   or press Escape: zoom out.
# - search: the box (and ?q=... or #q=... in the URL, for links and the browser test) marks the
#   nodes and table rows whose path holds the text (case-insensitive) and dims the rest; the
#   count of matches is shown. ?zoom=PATH zooms to that region at load (for links and the
#   browser test: body[data-zoom-ms] says what the zoom took).
# - the table below: the text table's columns (compare's in the differential view), one
#   section per context, tree-indented; a click on a column's header sorts by it (largest
#   first, again: smallest first; rows then show full paths), on the first column's back to
#   the tree; ?sort=KEY (delta, ratio, p50, ...; KEY:asc for smallest first) sorts at load.
# - the inverted view: per context, the self p50 of each class (or, where the run recorded no
#   class, each name) summed over all its call sites, largest first: where glue work (the
#   parents' own time between their children) goes. A click on a row marks its sites.
# - body[data-ready] is set when everything is drawn, with data-render-ms (what drawing took,
#   for the responsiveness test).
# - the JSON is embedded with every "<", ">" and "&" escaped (\u003c ...): the data element's
#   text then holds no markup at all, so no name ("</script>", "<!--<script>") can move the
#   HTML tokenizer out of it; numbers must be finite (JSON has no NaN: JSON.parse would reject
#   the page's data).

STYLE = """
*{box-sizing:border-box}body{font:13px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;
margin:0;color:#1d232a;background:#fafafa}header{padding:10px 16px;background:#20303f;
color:#fff;display:flex;gap:16px;align-items:center;flex-wrap:wrap}header h1{font-size:16px;
margin:0;font-weight:600}header input[type=search]{font:inherit;padding:4px 8px;width:260px;border-radius:4px;
border:1px solid #8aa}header label{font-size:12px}#matches{font-size:12px;opacity:.85}
header a{color:#cde}.runs{font-size:12px;opacity:.9}.legend{font-size:12px}
.legend span{display:inline-block;padding:0 6px;margin-left:4px;border-radius:3px;color:#1d1d1d}
main{padding:8px 16px}section{margin:10px 0 18px}h2{font-size:14px;margin:6px 0;
cursor:pointer}h2 small{font-weight:400;color:#566}.flame{position:relative;background:#fff;
border:1px solid #dde;overflow:hidden}.node{position:absolute;height:17px;overflow:hidden;
white-space:nowrap;text-overflow:ellipsis;font-size:11px;line-height:17px;padding:0 3px;
border-right:1px solid #fff;border-bottom:1px solid #fff;cursor:pointer;color:#1d1d1d}
.node.v-new::before{content:"+ "}.node.v-gone::before{content:"\\2212  "}
.node.v-new{box-shadow:inset 0 -3px 0 #9a6a00}.node.v-gone,.legend .v-gone{color:#444;
background-image:repeating-linear-gradient(135deg,rgba(0,0,0,.16) 0 3px,transparent 3px 7px)}
.node.narrow{color:transparent;padding:0}.node.narrow::before{content:none}
.node:hover{outline:1px solid #000;z-index:2}.dim .node{opacity:.35}.dim .node.match{opacity:1}
.node.match{background:#6a5acd !important;color:#fff}#tip{position:fixed;pointer-events:none;
background:#20303f;color:#fff;padding:6px 8px;border-radius:4px;font-size:12px;display:none;
z-index:10;max-width:560px;white-space:pre}table{border-collapse:collapse;background:#fff;
font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace;margin-top:6px}
th,td{padding:1px 8px;border-bottom:1px solid #eef}th{text-align:right;background:#eef1f5}
th:first-child,td:first-child{text-align:left}td{text-align:right}tr.match td{background:#e6e1ff}
th.sortable{cursor:pointer}th.sortable:hover{text-decoration:underline}
th[aria-sort=descending]::after{content:" \\25BC"}th[aria-sort=ascending]::after{content:" \\25B2"}
td.v-slower{color:#b3261e;font-weight:600}td.v-faster{color:#1d5fb3;font-weight:600}
.dimrows tr.row:not(.match),.dimrows tr.inv:not(.match){opacity:.45}tr.inv{cursor:pointer}
#tables section,#inverted section{content-visibility:auto;contain-intrinsic-size:auto 1200px}
table.modules,table.inverted{table-layout:fixed;width:720px}
table.modules th:first-child,table.inverted th:first-child{width:340px}
table.diff{width:940px}table.diff th:first-child{width:330px}table.inverted.diff{width:860px}
table.modules td:first-child,table.inverted td:first-child{overflow:hidden;
text-overflow:ellipsis;white-space:nowrap}
"""

SCRIPT = r"""
(function(){
"use strict";
const t0=performance.now();
const DATA=JSON.parse(document.getElementById("data").textContent);
const DIFF=DATA.kind==="diff";
const ROW=18,NARROW=28;
// As _table.py's us() and fixed(): half away from zero, the same double operations.
function fixed(v,d){const k=Math.pow(10,d);return (Math.floor(v*k+0.5)/k).toFixed(d);}
function us(ns){const v=ns/1000;if(v>=1e7)return v.toExponential(2).replace("e+","e");
if(v>=1000)return fixed(v,0);if(v>=10)return fixed(v,1);return fixed(v,2);}
function signed(ns){return ns===null?"-":(ns<0?"-":"+")+us(Math.abs(ns));}
function share(v,t){return t>0?fixed(100*v/t,1)+"%":"0.0%";}
function esc(s){return String(s).replace(/&/g,"&amp;").replace(/</g,"&lt;").replace(/>/g,"&gt;")
  .replace(/"/g,"&quot;");}
const VERDICT={"slower":"v-slower","faster":"v-faster","":"v-same","few":"v-few",
  "only B":"v-new","only A":"v-gone"};
const SAYS={"slower":"slower: p50 beyond the other run's p05-p95, both ways",
  "faster":"faster: p50 beyond the other run's p05-p95, both ways","":"within the noise",
  "few":"few samples in a run: not judged","only B":"new: only in B","only A":"gone: only in A"};
const tip=document.getElementById("tip");
const views=[];const grids=[];
let mode="p50";
// Palette of one run: hue, saturation, lightness; neighbours in the list differ in hue.
const PALETTE=[[206,62,74],[28,78,70],[140,42,66],[282,40,77],[48,82,64],[350,58,77],
  [178,46,64],[96,46,67],[232,48,79],[12,68,71],[318,36,75],[64,52,66]];
function hash(s){let h=0;for(let i=0;i<s.length;i++)h=(h*31+s.charCodeAt(i))>>>0;return h;}
function hsl(c){return "hsl("+c[0]+","+c[1]+"%,"+c[2]+"%)";}
function diffColor(r){
  // compare's verdict only (Note [HTML report]); the depth of the hue grows with the ratio.
  const k=r.ratio>0?Math.min(Math.abs(Math.log2(r.ratio)),1):1;
  if(r.verdict==="slower")return hsl([4,80,Math.round(76-24*k)]);
  if(r.verdict==="faster")return hsl([212,80,Math.round(76-24*k)]);
  if(r.verdict==="only B")return hsl([45,92,60]);
  if(r.verdict==="only A")return hsl([210,6,90]);
  return hsl([210,6,80]);}
function colors(ctx){
  const n=ctx.rows.length;const out=new Array(n);
  if(DIFF){for(let i=0;i<n;i++)out[i]=diffColor(ctx.rows[i]);return out;}
  const pick=new Int32Array(n);
  for(let i=0;i<n;i++){const r=ctx.rows[i];let c=hash(r.cls||r.name)%PALETTE.length;
    const p=r.parent>=0?pick[r.parent]:-1,s=ctx.prev[i]>=0?pick[ctx.prev[i]]:-1;
    while(c===p||c===s)c=(c+1)%PALETTE.length;
    pick[i]=c;out[i]=hsl(PALETTE[c]);}
  return out;}
function layout(ctx){
  const n=ctx.rows.length;const kids=ctx.kids;const w=new Float64Array(n);
  // widths bottom-up, positions top-down: the rows come parents first
  for(let i=n-1;i>=0;i--){const r=ctx.rows[i];
    if(mode==="p50")w[i]=r.p50;else{let s=r.self;for(const k of kids[i])s+=w[k];w[i]=s;}}
  const x=new Float64Array(n),ww=new Float64Array(n);
  let total=0;for(const r of ctx.roots)total+=w[r];
  const place=(list,start,span)=>{let sum=0;for(const k of list)sum+=w[k];
    const scale=sum>span&&sum>0?span/sum:1;let at=start;
    for(const k of list){x[k]=at;ww[k]=w[k]*scale;at+=ww[k];}};
  place(ctx.roots,0,total);
  for(let i=0;i<n;i++)place(kids[i],x[i],ww[i]);
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
    const visible=wd*px>=1&&l<1&&l+wd>0&&(zoom<0||anc.has(i)||(i>=zoom&&i<=ctx.end[zoom]));
    // Only what changes is written: a zoom leaves most hidden nodes untouched.
    if(!visible){if(node._shown!==false){node.style.display="none";node._shown=false;}continue;}
    if(node._shown!==true){node.style.display="";node._shown=true;}
    const left=Math.max(l,0),width=Math.min(l+wd,1)-left;
    node.style.left=(left*100)+"%";node.style.width=(width*100)+"%";
    const narrow=width*px<NARROW;
    if(node._narrow!==narrow){node._narrow=narrow;node.classList.toggle("narrow",narrow);
      if(narrow)node.title=ctx.rows[i].path;else node.removeAttribute("title");}
    if(ctx.rows[i].depth>maxDepth)maxDepth=ctx.rows[i].depth;}
  el.style.height=((maxDepth-ctx.base+1)*ROW+2)+"px";ctx.zoom=zoom;
}
function stats(s){return "count "+s.count+"   p50 "+us(s.p50)+" us   p95 "+us(s.p95)+
  " us   self p50 "+us(s.self)+" us";}
function tipText(ctx,r){
  let t=r.path+"\n"+(r.cls?"class "+r.cls+"\n":"");
  if(!DIFF)return t+stats(r)+" ("+share(r.self,ctx.total)+")\nshare "+share(r.p50,ctx.total);
  t+=SAYS[r.verdict]+"\nA: "+(r.a?stats(r.a):"-")+"\nB: "+(r.b?stats(r.b):"-");
  if(r.delta!==null)t+="\ndelta "+signed(r.delta)+" us   ratio "+(r.ratio===null?"-":r.ratio.toFixed(3));
  return t;}
function build(ctx,section){
  const n=ctx.rows.length;ctx.kids=[];ctx.prev=new Int32Array(n);ctx.end=new Int32Array(n);
  for(let i=0;i<n;i++)ctx.kids.push([]);ctx.roots=[];ctx.base=1e9;
  for(let i=0;i<n;i++){const p=ctx.rows[i].parent;const list=p>=0?ctx.kids[p]:ctx.roots;
    ctx.prev[i]=list.length?list[list.length-1]:-1;list.push(i);
    ctx.base=Math.min(ctx.base,ctx.rows[i].depth);}
  // the last row of each subtree (parents first: a subtree is a range of indices)
  for(let i=n-1;i>=0;i--){const k=ctx.kids[i];ctx.end[i]=k.length?ctx.end[k[k.length-1]]:i;}
  const h=document.createElement("h2");h.textContent=ctx.name+" ";
  const sm=document.createElement("small");sm.textContent=ctx.header+" (click a box to zoom; here or Esc: zoom out)";
  h.appendChild(sm);section.appendChild(h);
  const flame=document.createElement("div");flame.className="flame";ctx.flame=flame;
  // One string, parsed once: at 5,000 regions far cheaper than 5,000 createElement calls.
  const fill=colors(ctx);const parts=[];
  for(let i=0;i<n;i++){const r=ctx.rows[i];
    parts.push('<div class="node',DIFF?" "+VERDICT[r.verdict]:"",'" data-i="',i,'" data-path="',
      esc(r.path),'" style="top:',(r.depth-ctx.base)*ROW,'px;background-color:',fill[i],'">',
      esc(r.name),'</div>');}
  flame.innerHTML=parts.join("");ctx.nodes=Array.from(flame.children);
  section.appendChild(flame);
  flame.addEventListener("click",e=>{const t=e.target.closest(".node");if(!t)return;
    const i=+t.dataset.i;draw(ctx,ctx.zoom===i?ctx.rows[i].parent:i);});
  flame.addEventListener("mousemove",e=>{const t=e.target.closest(".node");if(!t){tip.style.display="none";return;}
    tip.textContent=tipText(ctx,ctx.rows[+t.dataset.i]);
    tip.style.display="block";tip.style.left=Math.min(e.clientX+12,innerWidth-580)+"px";
    tip.style.top=(e.clientY+14)+"px";});
  flame.addEventListener("mouseleave",()=>{tip.style.display="none";});
  h.addEventListener("click",()=>draw(ctx,-1));
  layout(ctx);
}
// A table whose columns sort on a click of their header: spec.cols [{t: title, key, v(i): the
// number sorted by (null: last), f(i): the cell's HTML, c(i): the cell's class}], spec.label(i,
// flat): the first cell (flat: once sorted, the tree's indentation means nothing).
function grid(t,spec){
  const parts=['<tr><th class="sortable" data-key="order">',esc(spec.head),"</th>"];
  for(const c of spec.cols)parts.push(c.key?'<th class="sortable" data-key="'+c.key+'">':"<th>",esc(c.t),"</th>");
  parts.push("</tr>");
  for(let i=0;i<spec.n;i++){parts.push('<tr class="',spec.row,'"',spec.attrs(i),"><td>",spec.label(i,false),"</td>");
    for(const c of spec.cols)parts.push(c.c?'<td class="'+c.c(i)+'">':"<td>",c.f(i),"</td>");
    parts.push("</tr>");}
  t.innerHTML=parts.join("");
  const g={t,spec,trs:Array.from(t.querySelectorAll("tr."+spec.row)),flat:false,sorted:null};
  t.querySelector("tr").addEventListener("click",e=>{const th=e.target.closest("th.sortable");
    if(!th)return;const k=th.dataset.key;
    sortGrid(g,k,!(g.sorted&&g.sorted.key===k&&g.sorted.desc));});
  grids.push(g);return g;}
function sortGrid(g,key,desc){
  const n=g.trs.length;const order=Array.from({length:n},(_,i)=>i);
  const col=g.spec.cols.find(c=>c.key===key);
  if(key!=="order"&&!col)return false;
  if(col){const v=order.map(i=>col.v(i));
    order.sort((p,q)=>{const a=v[p],b=v[q];if(a===null||b===null)return (a===null)-(b===null);
      return desc?b-a:a-b;});}
  const flat=key!=="order"&&g.spec.tree;
  if(flat!==g.flat){for(let i=0;i<n;i++)g.trs[i].cells[0].innerHTML=g.spec.label(i,flat);g.flat=flat;}
  if(n){const body=g.trs[0].parentNode,f=document.createDocumentFragment();
    for(const i of order)f.appendChild(g.trs[i]);body.appendChild(f);}
  for(const th of g.t.querySelectorAll("th.sortable"))
    if(th.dataset.key===key&&key!=="order")th.setAttribute("aria-sort",desc?"descending":"ascending");
    else th.removeAttribute("aria-sort");
  g.sorted={key,desc};return true;}
function table(ctx,section){
  const t=document.createElement("table");t.className="modules"+(DIFF?" diff":"");
  t.dataset.context=ctx.name;section.appendChild(t);
  const R=ctx.rows,none=()=>"-";
  const cols=DIFF?[
    {t:"A p50",key:"a50",v:i=>R[i].a?R[i].a.p50:null,f:i=>R[i].a?us(R[i].a.p50):"-"},
    {t:"B p50",key:"b50",v:i=>R[i].b?R[i].b.p50:null,f:i=>R[i].b?us(R[i].b.p50):"-"},
    {t:"delta",key:"delta",v:i=>R[i].delta,f:i=>signed(R[i].delta)},
    {t:"ratio",key:"ratio",v:i=>R[i].ratio,f:i=>R[i].ratio===null?"-":R[i].ratio.toFixed(3)},
    {t:"A self",key:"aself",v:i=>R[i].a?R[i].a.self:null,f:i=>R[i].a?us(R[i].a.self):"-"},
    {t:"B self",key:"bself",v:i=>R[i].b?R[i].b.self:null,f:i=>R[i].b?us(R[i].b.self):"-"},
    {t:"change",f:i=>R[i].verdict,c:i=>VERDICT[R[i].verdict]}]:[
    {t:"count",key:"count",v:i=>R[i].count,f:i=>R[i].count},
    {t:"p50 us",key:"p50",v:i=>R[i].p50,f:i=>us(R[i].p50)},
    {t:"p95 us",key:"p95",v:i=>R[i].p95,f:i=>us(R[i].p95)},
    {t:"self p50",key:"self",v:i=>R[i].self,f:i=>us(R[i].self)},
    {t:"self %",f:i=>share(R[i].self,ctx.total)}];
  ctx.grid=grid(t,{head:DATA.noun,cols,n:R.length,row:"row",tree:true,
    attrs:i=>' data-path="'+esc(R[i].path)+'"'+(DIFF?' data-verdict="'+esc(R[i].verdict)+'"':""),
    label:(i,flat)=>flat?esc(R[i].path):"&nbsp;&nbsp;".repeat(R[i].depth-ctx.base)+esc(R[i].name)});
  for(const tr of ctx.grid.trs)tr.cells[0].title=tr.dataset.path;
  ctx.trs=ctx.grid.trs;ctx.tableEl=t;
}
function inverted(ctx,section){
  // Self time of each class (or name) over all its call sites (Note [HTML report]).
  const groups=new Map();const R=ctx.rows;
  for(let i=0;i<R.length;i++){const r=R[i];const key=r.cls||r.name;let g=groups.get(key);
    if(!g){g={key,sites:[],self:0,a:0,b:0,slower:0,faster:0};groups.set(key,g);}
    g.sites.push(i);g.self+=r.self;
    if(DIFF){if(r.a)g.a+=r.a.self;if(r.b)g.b+=r.b.self;
      if(r.verdict==="slower")g.slower++;if(r.verdict==="faster")g.faster++;}}
  const G=Array.from(groups.values());
  G.sort((p,q)=>DIFF?q.b-p.b:q.self-p.self);
  const t=document.createElement("table");t.className="inverted"+(DIFF?" diff":"");
  t.dataset.context=ctx.name;section.appendChild(t);
  const flagged=g=>[g.slower?g.slower+" slower":"",g.faster?g.faster+" faster":""].filter(s=>s).join(", ");
  const cols=[{t:"sites",key:"sites",v:i=>G[i].sites.length,f:i=>G[i].sites.length}].concat(DIFF?[
    {t:"A self sum",key:"a",v:i=>G[i].a,f:i=>us(G[i].a)},
    {t:"B self sum",key:"b",v:i=>G[i].b,f:i=>us(G[i].b)},
    {t:"delta",key:"delta",v:i=>G[i].b-G[i].a,f:i=>signed(G[i].b-G[i].a)},
    {t:"flagged sites",f:i=>flagged(G[i])}]:[
    {t:"self p50 sum",key:"self",v:i=>G[i].self,f:i=>us(G[i].self)},
    {t:"self %",f:i=>share(G[i].self,ctx.total)}]);
  const g=grid(t,{head:DATA.noun+" class or name",cols,n:G.length,row:"inv",tree:false,
    attrs:i=>' data-key="'+esc(G[i].key)+'"',label:i=>esc(G[i].key)});
  sortGrid(g,DIFF?"b":"self",true);
  t.addEventListener("click",e=>{const tr=e.target.closest("tr.inv");if(!tr)return;
    const sites=new Set(G[g.trs.indexOf(tr)].sites);let count=0;
    for(let i=0;i<R.length;i++){const m=sites.has(i);ctx.nodes[i].classList.toggle("match",m);count+=m;}
    ctx.flame.classList.add("dim");ctx.flame.scrollIntoView({block:"nearest"});
    document.getElementById("matches").textContent=count+" site"+(count===1?"":"s")+" of "+tr.dataset.key;});
  ctx.invTrs=g.trs;ctx.invEl=t;
}
function search(q){q=(q||"").toLowerCase();let count=0;
  for(const ctx of views){
    for(let i=0;i<ctx.rows.length;i++){const m=q!==""&&ctx.rows[i].path.toLowerCase().includes(q);
      ctx.nodes[i].classList.toggle("match",m);if(m)count++;}
    for(const tr of ctx.trs)tr.classList.toggle("match",q!==""&&tr.dataset.path.toLowerCase().includes(q));
    for(const tr of ctx.invTrs)tr.classList.toggle("match",q!==""&&tr.dataset.key.toLowerCase().includes(q));
    ctx.flame.classList.toggle("dim",q!=="");ctx.tableEl.classList.toggle("dimrows",q!=="");
    ctx.invEl.classList.toggle("dimrows",q!=="");}
  document.getElementById("matches").textContent=q?count+" match"+(count===1?"":"es"):"";
  return count;}
const main=document.querySelector("main");const below=document.getElementById("tables");
const inv=document.getElementById("inverted");
for(const ctx of DATA.contexts){const s=document.createElement("section");s.className="context";
  s.dataset.context=ctx.name;build(ctx,s);main.insertBefore(s,below);views.push(ctx);}
for(const ctx of views){
  for(const [parent,fill] of [[below,table],[inv,inverted]]){const s=document.createElement("section");
    const h=document.createElement("h2");h.textContent=ctx.name;s.appendChild(h);
    fill(ctx,s);parent.appendChild(s);}}
if(!views.length){const p=document.createElement("p");
  p.textContent="No timed "+DATA.noun+"s: nothing to draw.";main.insertBefore(p,below);}
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
const sort=params.get("sort");
if(sort){const [key,how]=sort.split(":");for(const ctx of views)sortGrid(ctx.grid,key,how!=="asc");}
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
<body data-kind="{kind}"><header><h1>{title}</h1>{runs}
<input id="q" type="search" placeholder="search {noun}s (e.g. attn)" aria-label="search">
<span id="matches"></span>
<label><input id="self" type="checkbox"> width: self time</label>{legend}
<a href="#inverted">inverted: self time over all call sites</a></header>
<main><div id="tables"><h2 class="tables">Per {noun} (microseconds)</h2></div>
<div id="inverted"><h2 class="tables">Self time by {noun} class or name, summed over all its
call sites (inverted; microseconds)</h2></div></main>
<div id="tip"></div>
<script type="application/json" id="data">{data}</script>
<script>{script}</script></body></html>
"""

LEGEND = ('<span class="legend">B against A:<span style="background:hsl(4,80%,60%)">slower'
          '</span><span style="background:hsl(212,80%,60%)">faster</span><span style="'
          'background:hsl(210,6%,80%)">within the noise or few samples</span><span style="'
          'background:hsl(45,92%,60%)">+ new (only B)</span><span class="v-gone" style="'
          'background-color:hsl(210,6%,90%)">&minus; gone (only A)</span></span>')

SourceName = Union[str, "os.PathLike[str]"]
NUMBERS = (("count", "count"), ("p50", "p50_ns"), ("p95", "p95_ns"), ("self", "self_p50_ns"))


def source_rows(source: Any, what: str) -> List[Row]:
    """The rows of `source` (a Profiler, a stats CSV path or rows); TypeError saying what `what`
    takes when it is none of them."""
    takes = (f"{what} takes a Profiler, the path of a statistics CSV (--csv, "
             "Profiler.write_stats_csv) or its rows (Profiler.stats())")
    if source is None or isinstance(source, (bytes, bytearray, Mapping)) or not (
            isinstance(source, (str, os.PathLike, Iterable)) or hasattr(source, "stats")):
        raise TypeError(f"{takes}; got {type(source).__name__}")
    try:
        return rows_of(source)
    except TypeError as e:  # rows that are not rows: say what is taken, and what was wrong
        raise TypeError(f"{takes}; got {type(source).__name__} of something else ({e})") from None


def _origin(source: Any) -> str:
    """How an error names the source: "stats.csv: " for a path, "" otherwise."""
    return f"{os.fspath(source)}: " if isinstance(source, (str, os.PathLike)) else ""


def _finite(row: Row, field: str, origin: str) -> float:
    value = float(row[field])
    if not math.isfinite(value):
        raise make_error(InvalidArgumentError,
                         f"{origin}region {row['path']!r} has {field} = {value}: the HTML report "
                         "draws finite times only; give the statistics as accgraph wrote them "
                         "(--csv, Profiler.write_stats_csv)")
    return value


def _numbers(row: Row, origin: str) -> Dict[str, float]:
    out = {key: _finite(row, field, origin) for key, field in NUMBERS}
    out["count"] = int(out["count"])
    return out


def _preorder(tree: Tree) -> List[int]:
    """The tree's rows, each parent before its children and subtrees in sibling order
    (iteratively: a tree 1,000 levels deep needs no recursion)."""
    order: List[int] = []
    stack = list(reversed(tree.roots))
    while stack:
        index = stack.pop()
        order.append(index)
        stack.extend(reversed(tree.children[index]))
    return order


def _nodes(tree: Tree, classes: Optional[Mapping[str, str]],
           origin: str) -> Tuple[List[int], List[Dict[str, Any]]]:
    """The tree's rows in pre-order, and what the page draws of each: path, name, depth,
    parent index, count, p50, p95, self p50 (ns) and class."""
    order = _preorder(tree)
    position = {old: new for new, old in enumerate(order)}
    out = []
    for old in order:
        row = tree.rows[old]
        parent = tree.parent[old]
        out.append({"path": row["path"], "name": tree.name(old),
                    "depth": int(row.get("depth", 0)),
                    "parent": position[parent] if parent >= 0 else -1,
                    **_numbers(row, origin), "cls": (classes or {}).get(row["path"], "")})
    return order, out


def _noun(classes: Optional[Mapping[str, str]]) -> str:
    """ "module" where the run recorded modules' classes (accgraph.torch), else "region"."""
    return "module" if classes else "region"


def report_data(rows: List[Row], *, labels: Optional[Mapping[int, str]] = None,
                classes: Optional[Mapping[str, str]] = None,
                replays: Optional[Replays] = None, origin: str = "") -> Dict[str, Any]:
    """What the page of one run draws: per context its name, header line (with the graph's
    replays run and timed, `replays` as graph_replays() gives them: Note [Reading tables]), time
    and rows (:func:`_nodes`); `origin` prefixes errors (the CSV's path)."""
    if replays is None:
        replays = graph_replays(rows, rows)
    contexts = []
    for context, group in by_context(rows).items():
        tree = Tree(group)
        name = context_name(context, labels)
        _, out = _nodes(tree, classes, origin)
        graph = replays.get(context[0]) if context[0] else None
        header = section_header(tree, name, graph).split(": ", 1)[-1]
        note = sampling_note(graph)
        contexts.append({"name": name, "header": header + (f"; {note}" if note else ""),
                         "total": tree.total_ns, "rows": out})
    return {"kind": "single", "noun": _noun(classes), "contexts": contexts}


def _diff_header(name: str, trees: Tuple[Tree, Tree],
                 replays: Tuple[Optional[Mapping[str, Any]], Optional[Mapping[str, Any]]]) -> str:
    graph = name.startswith("graph") or name == "all reports"
    what, per = ("replays", "replay") if graph else ("calls", "call")
    runs = []
    for run, tree, counted in zip("AB", trees, replays):
        if not tree.rows:
            runs.append(f"{run}: -")
            continue
        count = (replays_text(counted) if graph else "") or f"{tree.replays()} {what}"
        runs.append(f"{run}: {count}, {us(tree.total_ns).strip()} us")
    return f"{'; '.join(runs)} per {per} {HOW}"


def diff_data(comparison: Comparison, *, classes: Optional[Mapping[str, str]] = None,
              origins: Tuple[str, str] = ("", "")) -> Dict[str, Any]:
    """What the differential page draws: per context of `comparison` B's tree with the rows
    only A has under their parents (drawn at A's p50), each row with both runs' numbers,
    delta, ratio and compare's verdict (:func:`verdict`); `origins` prefix errors (the CSVs'
    paths)."""
    entries: Dict[Any, List[Dict[str, Any]]] = {c: [] for c in comparison.names}
    for entry in comparison.rows:
        entries.setdefault(entry["context"], []).append(entry)
    contexts = []
    for context, name in comparison.names.items():
        group = entries[context]
        if not group:
            continue
        # Each row's numbers are checked as its run's (an error names that run's file).
        runs = [{"a": _numbers(e["a"], origins[0]) if e["a"] is not None else None,
                 "b": _numbers(e["b"], origins[1]) if e["b"] is not None else None}
                for e in group]
        tree = Tree([e["b"] if e["b"] is not None else e["a"] for e in group])
        order, out = _nodes(tree, classes, "")
        for node, old in zip(out, order):
            e = group[old]
            node.update({**runs[old],
                         "delta": e["delta_ns"], "ratio": e["ratio"], "verdict": verdict(e)})
        trees = (Tree([e["a"] for e in group if e["a"] is not None]),
                 Tree([e["b"] for e in group if e["b"] is not None]))
        graph_id = context[0] if isinstance(context, tuple) else None
        counted = (comparison.replays[0].get(graph_id) if graph_id else None,
                   comparison.replays[1].get(graph_id) if graph_id else None)
        contexts.append({"name": name, "header": _diff_header(name, trees, counted),
                         "total": trees[1].total_ns if trees[1].rows else trees[0].total_ns,
                         "rows": out})
    return {"kind": "diff", "noun": _noun(classes), "contexts": contexts}


def page(data: Mapping[str, Any], title: str, runs: str = "") -> str:
    """The page drawing `data` (report_data or diff_data): Note [HTML report]."""
    # No "<" (nor ">", "&") in the data element: nothing in it is markup (Note [HTML report]).
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    diff = data.get("kind") == "diff"
    return PAGE.format(title=html.escape(title), style=STYLE, data=text, script=SCRIPT,
                       kind=data.get("kind", "single"), noun=data.get("noun", "region"),
                       runs=f'<span class="runs">{html.escape(runs)}</span>' if runs else "",
                       legend=LEGEND if diff else "")


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
                title: Optional[str] = None) -> str:
    """The HTML report of `source` (a Profiler, a stats CSV path or rows) as a string."""
    rows = source_rows(source, "write_html")
    if classes is None and hasattr(source, "reports"):
        classes = classes_of(source)
    data = report_data(rows, labels=labels, classes=classes,
                       replays=graph_replays(source, rows), origin=_origin(source))
    return page(data, title or f"accgraph {data['noun']} timing")


def write_html(source: Any, path: SourceName, *,
               labels: Optional[Mapping[int, str]] = None,
               classes: Optional[Mapping[str, str]] = None,
               title: Optional[str] = None) -> None:
    """Writes the HTML report of `source` to `path`: one self-contained file (Note [HTML
    report]); replaced only once complete; OSError with the system's reason.

    `source`: an accgraph.Profiler (any backend's: a host run's regions as well as a torch run's
    modules), the path of a statistics CSV (``--csv``, Profiler.write_stats_csv) or its rows
    (Profiler.stats()); TypeError for anything else, InvalidArgumentError (a ValueError) for
    statistics that are not finite. `labels`: graph id -> capture site or label
    (accgraph.torch.graph_labels()); `classes`: region path -> class (from a Profiler's
    reports when not given); `title`: the page's (default "accgraph module timing", or
    "region" where the run recorded no module classes)."""
    text = html_report(source, labels=labels, classes=classes, title=title)
    write_text_file(os.fspath(path), "the HTML report", text)


def _run_name(source: Any, run: str) -> str:
    return f"{run}: {os.fspath(source)}" if isinstance(source, (str, os.PathLike)) else run


def diff_html_report(comparison: Comparison, *, a: Any = None, b: Any = None,
                     classes: Optional[Mapping[str, str]] = None,
                     title: Optional[str] = None) -> str:
    """The differential HTML report of `comparison` (compare's result) as a string; `a`, `b`:
    the two runs compared (their file names go into the page, a Profiler's classes too)."""
    if classes is None:
        classes = {}
        for source in (a, b):
            if hasattr(source, "reports"):
                classes.update(classes_of(source))
    data = diff_data(comparison, classes=classes, origins=(_origin(a), _origin(b)))
    runs = f"{_run_name(a, 'A')}  \u2192  {_run_name(b, 'B')}"
    return page(data, title or f"accgraph {data['noun']} timing: B against A", runs)


def write_diff_html(comparison: Comparison, path: SourceName, *, a: Any = None, b: Any = None,
                    classes: Optional[Mapping[str, str]] = None,
                    title: Optional[str] = None) -> None:
    """Writes the differential HTML report of `comparison` to `path` (Note [HTML report]): B's
    icicle coloured by compare's verdicts, the table sortable by delta and ratio, the inverted
    view; replaced only once complete; OSError with the system's reason."""
    text = diff_html_report(comparison, a=a, b=b, classes=classes, title=title)
    write_text_file(os.fspath(path), "the differential HTML report", text)


def compare(a: Any, b: Any, *, html: Optional[SourceName] = None,
            labels: Optional[Mapping[int, str]] = None, **options: Any) -> Comparison:
    """Compares the module timing of two runs: `a` and `b` are stats CSV paths (``--csv``),
    Profilers or rows (Note [Comparing runs] says what is flagged); `html`: also writes the
    differential HTML report there (:func:`write_diff_html`: B's icicle coloured by these
    verdicts). Returns the :class:`Comparison` (its ``text()`` is the table the command line
    prints)."""
    result = compare_runs(a, b, labels=labels, **options)
    if html is not None:
        write_diff_html(result, html, a=a, b=b)
    return result

