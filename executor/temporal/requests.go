package temporal

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
)

func describeNamespace(ns string) *workflowservice.DescribeNamespaceRequest {
	return &workflowservice.DescribeNamespaceRequest{Namespace: ns}
}

func listRequest(ns, query string, token []byte) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns, Query: query, NextPageToken: token, PageSize: 1000}
}

func deleteRequest(ns, id, runID string) *workflowservice.DeleteWorkflowExecutionRequest {
	return &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace:         ns,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
	}
}
