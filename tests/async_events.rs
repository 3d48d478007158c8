//! HCA async events in a whole job. Every process prints the async events of
//! every device it opened (one event thread per device, used or not), so the
//! ranks behind a device fault are the device's users, not its reporters.

mod common;

use common::write;

/// Two hosts of four ranks, NCCL 2.21 with PXN: on gn02, rank 6 sends over
/// mlx5_3 through rank 7's proxy (`NET/IB/3(7)`), and rank 7 drives it. The
/// device fails: ranks 6 and 7 both print its catastrophic error, rank 7's
/// transfers fail (status 5) and its watchdog takes it down; the others
/// time out ten minutes later.
#[test]
fn a_device_fault_is_its_proxys_not_the_rank_relaying_through_it_pxn_nccl_2_21() {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..8u32 {
        let host = format!("gn0{}", r / 4 + 1);
        let (l, pid) = (r % 4, 7100 + r);
        let p = format!("{host}:{pid}:{} [{l}]", pid + 30);
        let mut text = format!(
            "{p} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB bond0:10.20.4.{}<0>\n\
             {p} NCCL INFO comm 0x5581 rank {r} nRanks 8 nNodes 2 localRanks 4 localRank {l} MNNVL 0\n\
             {p} NCCL INFO ncclCommInitRank comm 0x5581 rank {r} nranks 8 cudaDev {l} nvmlDev {l} busId {}000 commId 0x7f21 - Init COMPLETE\n",
            r / 4 + 1,
            [0x18, 0x2a, 0x3a, 0x5d][l as usize]
        );
        let peer = (r + 4) % 8;
        text += &format!(
            "{p} NCCL INFO Channel 00/0 : {peer}[{l}] -> {r}[{l}] [receive] via NET/IB/{l}/GDRDMA\n"
        );
        let via = if r == 6 {
            "3(7)".to_string()
        } else {
            l.to_string()
        };
        text += &format!(
            "{p} NCCL INFO Channel 00/0 : {r}[{l}] -> {peer}[{l}] [send] via NET/IB/{via}/GDRDMA\n"
        );
        let rank = format!("[rank{r}]:");
        if r == 6 || r == 7 {
            text += &format!(
                "{p} transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_3:1 Got async event : local catastrophic error\n"
            );
        }
        if r == 7 {
            text += &format!(
                "{p} transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion from peer 10.20.4.1<52817> with status=5 opcode=0 len=0 vendor err 249 (Recv)\n\
                 {rank}[E1118 03:41:52.919204731 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 7] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5\n"
            );
        } else {
            text += &format!(
                "{rank}[E1118 03:51:52.262000019 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=845447, OpType=_ALLGATHER_BASE, NumelIn=19267584, NumelOut=154140672, Timeout(ms)=600000) ran for 600022 milliseconds before timing out.\n"
            );
        }
        write(dir.path(), &format!("{host}/rank{r}.log"), &text);
    }
    let doc = common::analyze_to_json(dir.path());
    let v = &doc["verdict"];
    assert_eq!(v["cause"]["kind"], "hca_fault", "{v:#}");
    assert_eq!(v["cause"]["device"], "mlx5_3", "{v:#}");
    assert_eq!(v["stuck_ranks"], serde_json::json!([7]), "{v:#}");
}
