// Stand-ins for the graph view's WebGL and worker dependencies, which jsdom lacks. A test
// file mocks the modules with them:
//   vi.mock("sigma", async () => ({ default: (await import("./fakeSigma")).FakeSigma }));
import type Graph from "graphology";

/** sigma needs WebGL: a stand-in that keeps the graph it was given. */
export class FakeSigma {
  constructor(public graph: Graph) {}
  on() {}
  getCamera() {
    return { getState: () => ({ x: 0.5, y: 0.5, ratio: 1, angle: 0 }) };
  }
  refresh() {}
  scheduleRefresh() {}
  scheduleRender() {
    return this;
  }
  kill() {}
}

/** ForceAtlas2's web-worker layout: no workers in jsdom. */
export class FakeLayout {
  start() {}
  kill() {}
}
