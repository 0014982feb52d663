// A notebook-style session on the full session image (issue 21 item 1; docs/sidecar.md,
// "The session image"): a CSV uploaded through /files, read with pandas, a matplotlib chart
// with a Chinese title saved to outputs/ (a PNG, no glyph missing), an xlsx written and read
// back in the next cell, every module imported from its byte-compiled file. Through the
// gate's sandbox profile, on the image scripts/test.sh builds (runtime-image.sh --full).
#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

std::string full_image() {
  const char* v = std::getenv("DOCKGATE_TEST_FULL_RUNTIME_IMAGE");
  return v && *v ? v : "dockgate/sandbox-runtime:full";
}

const std::string first_cell = R"(
import sys, importlib.util
import pandas as pd
import matplotlib.pyplot as plt
from matplotlib.font_manager import findfont, FontProperties
df = pd.read_csv('/workspace/uploads/sales.csv')
fig, ax = plt.subplots()
ax.bar(df['region'], df['amount'])
ax.set_title('各地区销售额（万元）')
fig.savefig('/workspace/outputs/chart.png')
with pd.ExcelWriter('/workspace/outputs/report.xlsx', engine='xlsxwriter') as w:
    df.to_excel(w, sheet_name='销售', index=False)
print('total', df['amount'].sum())
print('font', findfont(FontProperties(family=['sans-serif'])).rsplit('/', 1)[-1])
# A module loaded from source, not from its .pyc, was compiled by this start.
stale = [m.__name__ for m in list(sys.modules.values())
         if getattr(m, '__spec__', None) and m.__spec__.origin and m.__spec__.origin.endswith('.py')
         and not (m.__spec__.cached and __import__('os').path.exists(m.__spec__.cached))]
print('compiled at start', len(stale), stale[:5])
)";

}  // namespace

TEST_CASE("notebook: pandas reads an upload, a CJK chart and an xlsx come back as artifacts",
          "[integration][sidecar][notebook]") {
  const std::string image = full_image();
  auto present = run(direct() + " image inspect " + image + " >/dev/null 2>&1");
  INFO("the full session image " + image + " is missing: scripts/runtime-image.sh DOCKER_HOST " +
       image + " --full (test.sh does)");
  REQUIRE(present.status == 0);
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image});
  const std::string sid = new_session(sidecar);
  // region,amount\n华东,120\n华南,95\n华北,80\n
  auto uploaded = sidecar.call(
      "POST", "/files",
      R"({"session_id":")" + sid +
          R"(","path":"uploads/sales.csv","data_base64":"cmVnaW9uLGFtb3VudArljY7kuJwsMTIwCuWNjuWNlyw5NQrljY7ljJcsODAK"})");
  INFO(uploaded.body);
  REQUIRE(uploaded.status == 200);

  auto first = sidecar.call("POST", "/exec", exec_body(sid, first_cell, 120000));
  INFO(first.body << "\n" << sidecar.log());
  REQUIRE(first.status == 200);
  CHECK(field(first.body, "exit_code") == "0");
  CHECK(field(first.body, "stdout") ==
        "total 295\nfont NotoSansCJK-Regular.ttc\ncompiled at start 0 []\n");
  const std::string err = field(first.body, "stderr");
  CHECK(err.find("missing from") == std::string::npos);  // matplotlib's "Glyph ... missing"
  CHECK(err.find("Matplotlib is building the font cache") == std::string::npos);
  // The artifacts: a PNG (its signature, base64) and the workbook.
  CHECK(
      first.body.find(R"("name":"chart.png","mime_type":"image/png","data_base64":"iVBORw0KGgo)") !=
      std::string::npos);
  CHECK(first.body.find(R"("name":"report.xlsx")") != std::string::npos);

  auto second = sidecar.call("POST", "/exec",
                             exec_body(sid, R"(
import openpyxl
ws = openpyxl.load_workbook('/workspace/outputs/report.xlsx')['销售']
print([[c.value for c in row] for row in ws.iter_rows()])
)",
                                       60000));
  INFO(second.body);
  REQUIRE(second.status == 200);
  CHECK(field(second.body, "stdout") ==
        "[['region', 'amount'], ['华东', 120], ['华南', 95], ['华北', 80]]\n");
}
